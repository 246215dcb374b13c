package settings

import (
	"errors"
	"reflect"
	"testing"
)

const sandboxFile = `{
  "sandbox": {
    "enabled": true,
    "autoAllowBashIfSandboxed": true,
    "excludedCommands": ["docker"],
    "filesystem": {
      "allowWrite": ["~/.cache/tool", "//tmp/build", "out"],
      "denyWrite": ["/etc/hosts"],
      "denyRead": ["~/.config/cloud/**"],
      "allowRead": ["~/.npmrc"]
    },
    "network": {"allowedDomains": ["example.com"], "allowLocalBinding": true}
  }
}`

func TestParseSandbox(t *testing.T) {
	s, err := ParseSettings([]byte(sandboxFile))
	if err != nil {
		t.Fatal(err)
	}
	want := Sandbox{
		AllowWrite: []string{"~/.cache/tool", "//tmp/build", "out"},
		DenyWrite:  []string{"/etc/hosts"},
		DenyRead:   []string{"~/.config/cloud/**"},
		AllowRead:  []string{"~/.npmrc"},
		Network:    Network{AllowedDomains: []string{"example.com"}},
	}
	if !reflect.DeepEqual(s.Sandbox, want) {
		t.Fatalf("Sandbox = %+v\nwant %+v", s.Sandbox, want)
	}
	got := s.Sandbox.Resolve("/home/u", "/proj")
	resolved := Sandbox{
		AllowWrite: []string{"/home/u/.cache/tool", "/tmp/build", "/proj/out"},
		DenyWrite:  []string{"/etc/hosts"},
		DenyRead:   []string{"/home/u/.config/cloud/**"},
		AllowRead:  []string{"/home/u/.npmrc"},
		Network:    Network{AllowedDomains: []string{"example.com"}},
	}
	if !reflect.DeepEqual(got, resolved) {
		t.Fatalf("Resolve = %+v\nwant %+v", got, resolved)
	}
	merged := s.Sandbox.Merge(Sandbox{AllowWrite: []string{"more"}})
	if !reflect.DeepEqual(merged.AllowWrite, []string{"~/.cache/tool", "//tmp/build", "out", "more"}) || len(merged.DenyRead) != 1 {
		t.Fatalf("Merge = %+v", merged)
	}
}

func TestSandboxProblems(t *testing.T) {
	cases := map[string]struct{ data, want string }{
		"empty path": {`{"sandbox": {"filesystem": {"allowWrite": ["ok", " "]}}}`,
			`settings:1:50: sandbox.filesystem.allowWrite[1]: empty path`},
		"not a list": {`{"sandbox": {"filesystem": {"denyRead": "~/.ssh"}}}`,
			`settings:1:41: sandbox.filesystem.denyRead: a JSON string where a list was expected`},
		"bad domain": {`{"sandbox": {"network": {"allowedDomains": ["ok.example", "bad domain"]}}}`,
			`settings:1:59: sandbox.network.allowedDomains[1]: domain entry "bad domain": "bad domain" is not a domain name (character ' ')`},
		"bad port": {`{"sandbox": {"network": {"deniedDomains": ["x.example:99999"]}}}`,
			`settings:1:44: sandbox.network.deniedDomains[0]: domain entry "x.example:99999": port "99999" is not a number from 1 to 65535`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSettings([]byte(c.data))
			var se *Error
			if !errors.As(err, &se) || err.Error() != c.want {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
		})
	}
}

// TestParseNetwork: an absent allowedDomains is nil, an empty one is not:
// in a session's settings the first keeps the executor's allowlist, the
// second allows no host.
func TestParseNetwork(t *testing.T) {
	cases := map[string]Network{
		`{}`: {},
		`{"sandbox": {"network": {"allowLocalBinding": true}}}`:                         {},
		`{"sandbox": {"network": {"allowedDomains": []}}}`:                              {AllowedDomains: []string{}},
		`{"sandbox": {"network": {"allowedDomains": ["*.npmjs.org", "pypi.org:443"]}}}`: {AllowedDomains: []string{"*.npmjs.org", "pypi.org:443"}},
		`{"sandbox": {"network": {"deniedDomains": ["evil.example"]}}}`:                 {DeniedDomains: []string{"evil.example"}},
	}
	for in, want := range cases {
		s, err := ParseSettings([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got := s.Sandbox.Network
		if !reflect.DeepEqual(got, want) || (got.AllowedDomains == nil) != (want.AllowedDomains == nil) {
			t.Errorf("%s: %#v, want %#v", in, got, want)
		}
	}
	merged := Network{}.Merge(Network{AllowedDomains: []string{}})
	if merged.AllowedDomains == nil {
		t.Error("merging an empty list into none lost it")
	}
	if m := (Network{}).Merge(Network{}); m.AllowedDomains != nil {
		t.Error("merging two absent lists made one")
	}
}
