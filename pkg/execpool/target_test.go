package execpool

import (
	"errors"
	"slices"
	"testing"
)

func TestParseTarget(t *testing.T) {
	ok := map[string]Target{
		"a:1":                        {Addrs: []string{"a:1"}},
		" a:1 , b:2,c:3 ":            {Addrs: []string{"a:1", "b:2", "c:3"}},
		"a:1,a:1,b:2":                {Addrs: []string{"a:1", "b:2"}},
		"[::1]:7070,10.0.0.1:7070":   {Addrs: []string{"[::1]:7070", "10.0.0.1:7070"}},
		"unix:///a.sock,unix:b":      {Addrs: []string{"unix:///a.sock", "unix:b"}},
		"dns:///toolsvc.ns.svc:7070": {Host: "toolsvc.ns.svc", Port: "7070"},
		"dns:toolsvc:7070":           {Host: "toolsvc", Port: "7070"},
		"dns:///[::1]:7070":          {Host: "::1", Port: "7070"},
	}
	for in, want := range ok {
		got, err := ParseTarget(in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", in, err)
			continue
		}
		if !slices.Equal(got.Addrs, want.Addrs) || got.Host != want.Host || got.Port != want.Port {
			t.Errorf("ParseTarget(%q) = %+v, want %+v", in, got, want)
		}
		if again, err := ParseTarget(got.String()); err != nil || again.String() != got.String() {
			t.Errorf("ParseTarget(%q).String() = %q does not parse back: %v", in, got.String(), err)
		}
	}
	bad := []string{
		"", "embedded", "a", "a:1,", ",a:1", "a:1,,b:2", ":7070", "a:",
		"dns:///toolsvc", "dns:///:7070", "dns://8.8.8.8/toolsvc:7070", "dns://toolsvc:7070", "unix://",
	}
	for _, in := range bad {
		if got, err := ParseTarget(in); !errors.Is(err, ErrBadTarget) {
			t.Errorf("ParseTarget(%q) = %+v, %v; want ErrBadTarget", in, got, err)
		}
	}
}

func TestIsPool(t *testing.T) {
	for in, want := range map[string]bool{
		"a:1,b:2":            true,
		"dns:///svc:7070":    true,
		"dns:svc:7070":       true,
		"a:1,":               true, // meant as a list; ParseTarget reports the error
		"a:1":                false,
		"embedded":           false,
		"":                   false,
		"unix:///run/x.sock": false,
		"unix:x.sock":        false,
	} {
		if got := IsPool(in); got != want {
			t.Errorf("IsPool(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"a:1", "a:1,b:2", "dns:///x:1", "unix:///s", "dns://a/b:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if tg.IsDNS() == (len(tg.Addrs) > 0) {
			t.Fatalf("ParseTarget(%q) = %+v: exactly one of DNS and Addrs must be set", s, tg)
		}
		again, err := ParseTarget(tg.String())
		if err != nil || again.String() != tg.String() {
			t.Fatalf("ParseTarget(%q).String() = %q does not parse back: %+v, %v", s, tg.String(), again, err)
		}
	})
}
