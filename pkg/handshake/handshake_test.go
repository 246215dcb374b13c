package handshake

import (
	"errors"
	"strings"
	"testing"
)

// full is what toolsvc serve reports with its recommended flags.
var full = Info{Backend: "landlock", Network: "none", Enforced: []string{
	"file_roots", "landlock_fs", "landlock_scope", "no_new_privs", "network_isolation",
	"process_tree", "unprivileged_user", "pid_isolation", "clean_environment"}}

func TestParse(t *testing.T) {
	r, err := Parse(" Landlock, network:none,,pid_isolation,landlock ")
	if err != nil || strings.Join(r, " ") != "landlock network:none pid_isolation" {
		t.Fatalf("Parse = %q, %v", r, err)
	}
	for _, bad := range []string{"landlok", "network:bridge", "backend:", "process"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "known: landlock, file_roots") {
			t.Errorf("Parse(%q) = %v", bad, err)
		}
	}
	if r, err := Parse(""); err != nil || len(r) != 0 {
		t.Errorf("Parse(\"\") = %q, %v", r, err)
	}
}

func TestCheck(t *testing.T) {
	none := Info{Backend: "none", Network: "host", Enforced: []string{"file_roots", "no_new_privs", "process_group", "clean_environment"}}
	allowlist := Info{Backend: "landlock", Network: "allowlist", Enforced: []string{"landlock_fs", "landlock_scope", "egress_allowlist", "process_tree"}}
	lying := Info{Backend: "landlock", Network: "none", Enforced: []string{"landlock_fs"}}
	cases := []struct {
		spec    string
		info    Info
		missing string // "" when met
	}{
		{"landlock,network:none,pid_isolation,process_group", full, ""},
		{"network:allowlist,network:host,backend:landlock", full, ""},
		{"network:allowlist", allowlist, ""},
		{"network:none", allowlist, `network:none (the network is "allowlist")`},
		{"landlock,network:none", none, `landlock (landlock_fs and landlock_scope not in force); network:none (the network is "host")`},
		{"network:allowlist,backend:landlock", none, `network:allowlist (the network is "host"); backend:landlock (the backend is "none")`},
		{"process_tree,process_group", none, "process_tree (not in force)"},
		{"network:none,landlock", lying, `network:none (the network is "none" without its protection in force); landlock (landlock_scope not in force)`},
		{"resource_limits", full, "resource_limits (not in force)"},
	}
	for _, c := range cases {
		r, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Check(c.info)
		var me *MissingError
		switch {
		case c.missing == "" && err != nil:
			t.Errorf("%s: %v", c.spec, err)
		case c.missing != "" && !errors.As(err, &me):
			t.Errorf("%s: got %v, want missing %s", c.spec, err, c.missing)
		case c.missing != "" && strings.Join(me.Missing, "; ") != c.missing:
			t.Errorf("%s: missing %q, want %q", c.spec, strings.Join(me.Missing, "; "), c.missing)
		}
		if c.missing != "" && !errors.Is(err, ErrMissing) {
			t.Errorf("%s: not ErrMissing", c.spec)
		}
	}
	err := Requirements{"landlock"}.Check(none)
	want := `the executor does not enforce what is required: landlock (landlock_fs and landlock_scope not in force) (it enforces file_roots, no_new_privs, process_group, clean_environment; backend "none", network "host")`
	if err == nil || err.Error() != want {
		t.Errorf("message:\n got %v\nwant %s", err, want)
	}
}

func TestProtectionWord(t *testing.T) {
	if got := ProtectionWord("PROTECTION_LANDLOCK_FS"); got != "landlock_fs" {
		t.Errorf("got %q", got)
	}
}
