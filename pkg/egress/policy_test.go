package egress

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParseRule(t *testing.T) {
	good := map[string]Rule{
		"example.com":          {Host: "example.com"},
		" Example.COM. ":       {Host: "example.com"},
		"example.com:443":      {Host: "example.com", Port: 443},
		"*.npmjs.org":          {Host: "npmjs.org", Wildcard: true},
		"*.npmjs.org:443":      {Host: "npmjs.org", Wildcard: true, Port: 443},
		"*":                    {Wildcard: true},
		"*:80":                 {Wildcard: true, Port: 80},
		"203.0.113.7":          {Host: "203.0.113.7"},
		"203.0.113.7:8080":     {Host: "203.0.113.7", Port: 8080},
		"2001:db8::1":          {Host: "2001:db8::1"},
		"[2001:db8::1]:443":    {Host: "2001:db8::1", Port: 443},
		"[2001:DB8::1]":        {Host: "2001:db8::1"},
		"under_score.internal": {Host: "under_score.internal"},
	}
	for in, want := range good {
		got, err := ParseRule(in)
		if err != nil || got != want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := []string{"", "exa mple.com", "example.com:0", "example.com:65536", "example.com:http",
		"*.", "a..b", "[2001:db8::1", "[example.com]:443", "[2001:db8::1]443", "*.*.com", "ex/ample.com"}
	for _, in := range bad {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %+v, want an error", in, r)
		}
	}
}

func TestRuleString(t *testing.T) {
	for _, s := range []string{"example.com", "example.com:443", "*.npmjs.org", "*", "*:80", "[2001:db8::1]:443", "2001:db8::1"} {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != s {
			t.Errorf("ParseRule(%q).String() = %q", s, r.String())
		}
	}
}

func TestCheckName(t *testing.T) {
	p, err := NewPolicy([]string{"api.example.com", "*.npmjs.org", "git.example.com:443", "*:8443"}, []string{"bad.npmjs.org"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host   string
		port   int
		reason Reason // "" for allowed
	}{
		{"api.example.com", 443, ""},
		{"api.example.com", 22, ""}, // no port: every port
		{"registry.npmjs.org", 443, ""},
		{"a.b.npmjs.org", 80, ""},
		{"npmjs.org", 443, ReasonNotAllowed}, // a wildcard covers subdomains only
		{"evilnpmjs.org", 443, ReasonNotAllowed},
		{"bad.npmjs.org", 443, ReasonDeniedDomain},
		{"git.example.com", 443, ""},
		{"git.example.com", 22, ReasonPort},
		{"example.com", 443, ReasonNotAllowed},
		{"anything.test", 8443, ""},
		{"anything.test", 443, ReasonNotAllowed},
	}
	for _, c := range cases {
		d := p.checkName(c.host, c.port)
		got := Reason("")
		if d != nil {
			got = d.Reason
		}
		if got != c.reason {
			t.Errorf("checkName(%s:%d) = %q, want %q", c.host, c.port, got, c.reason)
		}
	}
	if d := p.checkName("git.example.com", 22); d.Why() != "port 22 is not allowed for git.example.com (allowed: git.example.com:443)" {
		t.Errorf("port denial says %q", d.Why())
	}
}

// TestNarrowTo: a session's list only ever narrows the operator's; what
// it asks beyond, it does not get.
func TestNarrowTo(t *testing.T) {
	op, err := NewPolicy([]string{"*.example.com", "pypi.org:443", "files.pythonhosted.org"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		session []string
		want    []string
	}{
		{[]string{"api.example.com"}, []string{"api.example.com"}},
		{[]string{"*.example.com:443"}, []string{"*.example.com:443"}},
		{[]string{"*.api.example.com"}, []string{"*.api.example.com"}},
		{[]string{"*"}, []string{"*.example.com", "pypi.org:443", "files.pythonhosted.org"}},
		{[]string{"*.org"}, []string{"pypi.org:443", "files.pythonhosted.org"}},
		{[]string{"pypi.org"}, []string{"pypi.org:443"}},
		{[]string{"pypi.org:80"}, nil},
		{[]string{"example.com"}, nil}, // the operator's wildcard does not cover its apex
		{[]string{"evil.test", "*.evil.test"}, nil},
		{[]string{}, nil},
	}
	for _, c := range cases {
		rules, err := ParseRules(c.session)
		if err != nil {
			t.Fatal(err)
		}
		got := op.NarrowTo(rules).AllowedEntries()
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("narrow to %q = %q, want %q", c.session, got, c.want)
		}
	}
	// The operator's own list is left alone.
	if got := op.AllowedEntries(); len(got) != 3 {
		t.Errorf("operator's list changed: %q", got)
	}
}

func TestCheckAddr(t *testing.T) {
	p, err := NewPolicy(nil, nil, []string{"10.9.0.0/16", "127.0.0.53"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{ // address -> range that forbids it, "" if allowed
		"93.184.216.34":          "",
		"203.0.113.9":            "",
		"2606:4700::1111":        "",
		"10.1.2.3":               "10.0.0.0/8",
		"10.9.1.1":               "", // listed
		"127.0.0.1":              "127.0.0.0/8",
		"127.0.0.53":             "", // listed alone
		"169.254.169.254":        "169.254.0.0/16",
		"172.20.0.1":             "172.16.0.0/12",
		"192.168.1.1":            "192.168.0.0/16",
		"100.100.100.100":        "100.64.0.0/10",
		"0.0.0.0":                "0.0.0.0/8",
		"224.0.0.1":              "224.0.0.0/4",
		"::1":                    "::1/128",
		"::":                     "::/128",
		"fe80::1":                "fe80::/10",
		"fd00::1":                "fc00::/7",
		"::ffff:127.0.0.1":       "127.0.0.0/8",
		"::ffff:169.254.169.254": "169.254.0.0/16",
		"64:ff9b::a9fe:a9fe":     "169.254.0.0/16", // NAT64 of the metadata address
		"64:ff9b::5db8:d822":     "",
	}
	for in, want := range cases {
		sr, ok := p.checkAddr(netip.MustParseAddr(in))
		got := ""
		if !ok {
			got = sr.prefix.String()
		}
		if got != want {
			t.Errorf("checkAddr(%s) forbidden by %q, want %q", in, got, want)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.a.b:443", "[::1]:80", "*", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseRule(%q) = %+v; its String %q parses to %+v, %v", s, r, r.String(), again, err)
		}
	})
}
