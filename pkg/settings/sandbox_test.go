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
