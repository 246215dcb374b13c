package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHomeAnchoredDeny(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, func(c *Config) {
		c.Home = home
		c.ReadOnly = append(c.ReadOnly, home)
	})
	mustWrite(t, home+"/.npmrc", "//registry/:_authToken=secret")
	mustWrite(t, f.work+"/.npmrc", "engine-strict=true")
	if _, err := f.read(home + "/.npmrc"); !isDenied(err) {
		t.Errorf("~/.npmrc: %v, want DeniedError", err)
	}
	if _, err := f.read("~/.npmrc"); !isDenied(err) {
		t.Errorf(`"~/.npmrc" as written: %v, want DeniedError`, err)
	}
	if got, err := f.read(".npmrc"); err != nil || got != "engine-strict=true" {
		t.Errorf("a project's .npmrc: %q, %v; want it readable", got, err)
	}
	if !slices.Contains(f.ws.DenyPatterns(), home+"/.npmrc") {
		t.Errorf("DenyPatterns = %q, want ~ expanded to %s", f.ws.DenyPatterns(), home)
	}
}

func TestDenyLocations(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	for _, d := range []string{home + "/.ssh", home + "/.config/gcloud", other + "/.ssh", home + "/etc/ssh"} {
		mustMkdir(t, d)
	}
	for _, f := range []string{home + "/id_rsa", home + "/id_rsa.pub", home + "/server.pem", home + "/notes.txt",
		home + "/etc/ssh/ssh_host_ed25519_key", home + "/etc/ssh/ssh_host_ed25519_key.pub", home + "/etc/ssh/ssh_config"} {
		mustWrite(t, f, "x")
	}
	patterns := []string{
		"**/.ssh/**",           // a directory, in every home
		"**/.aws/**",           // missing: named all the same
		"**/.config/gcloud/**", // nested
		"**/id_rsa*",           // wildcard: what is there now
		"*.pem",                // unanchored
		"~/.npmrc",             // home only
		home + "/etc/ssh/ssh_host_*key",
		home + "/etc/shadow",
		"/srv/**/*.key",   // no place: file tools only
		"**/{a,b}.secret", // no place either
	}
	got := DenyLocations(patterns, home, []string{home, other})
	want := []string{
		home + "/.ssh", other + "/.ssh",
		home + "/.aws", other + "/.aws",
		home + "/.config/gcloud", other + "/.config/gcloud",
		home + "/id_rsa", home + "/id_rsa.pub",
		home + "/server.pem",
		home + "/.npmrc",
		home + "/etc/ssh/ssh_host_ed25519_key",
		home + "/etc/shadow",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("DenyLocations =\n%q\nwant\n%q", got, want)
	}
}

// TestDefaultDenyLocations checks that the default list places the secrets
// the sandbox must keep processes out of.
func TestDefaultDenyLocations(t *testing.T) {
	home := t.TempDir()
	mustMkdir(t, filepath.Join(home, ".ssh"))
	got := DenyLocations(DefaultDeny(), home, []string{home})
	for _, p := range []string{".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json",
		".local/share/keyrings", ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".claude/.credentials.json"} {
		if !slices.Contains(got, filepath.Join(home, p)) {
			t.Errorf("%s is not among the default deny locations", p)
		}
	}
	for _, p := range []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s is not among the default deny locations", p)
		}
	}
	if _, err := os.Stat("/etc/ssh/ssh_config"); err == nil && slices.Contains(got, "/etc/ssh/ssh_config") {
		t.Error("/etc/ssh/ssh_config is denied; only host keys should be")
	}
}
