package toolcache

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/testkit"
)

func paths(ds []Dir) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Path)
	}
	return out
}

func TestDefaults(t *testing.T) {
	got := paths(Dirs("/home/u", func(string) string { return "" }))
	want := []string{
		"/home/u/.cache/go-build", "/home/u/go/pkg/mod", "/home/u/go/pkg/sumdb",
		"/home/u/.cache/pip", "/home/u/.npm", "/home/u/.cargo/registry", "/home/u/.cargo/git",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Dirs =\n%q\nwant\n%q", got, want)
	}
}

func TestEnvironmentAndGoEnvFile(t *testing.T) {
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "go"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The file sets GOMODCACHE; the environment's GOCACHE wins over the
	// file's.
	file := "GOCACHE=/from/file/cache\nGOMODCACHE=/from/file/mod\n"
	if err := os.WriteFile(filepath.Join(cfg, "go", "env"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"XDG_CONFIG_HOME":  cfg,
		"XDG_CACHE_HOME":   "relative/ignored",
		"GOCACHE":          "/env/gocache",
		"GOPATH":           "/gp1:/gp2",
		"PIP_CACHE_DIR":    "/pip",
		"npm_config_cache": "/npm",
		"CARGO_HOME":       "/cargo",
	}
	got := paths(Dirs("/home/u", func(k string) string { return env[k] }))
	want := []string{"/env/gocache", "/from/file/mod", "/gp1/pkg/sumdb", "/pip", "/npm", "/cargo/registry", "/cargo/git"}
	if !slices.Equal(got, want) {
		t.Errorf("Dirs =\n%q\nwant\n%q", got, want)
	}
	env["GOCACHE"] = "off"
	if got := paths(Dirs("/home/u", func(k string) string { return env[k] })); slices.Contains(got, "off") || got[0] != "/from/file/mod" {
		t.Errorf("GOCACHE=off: %q", got)
	}
}

// TestAgreesWithGo compares with what the go command itself reports, for
// a fake home with a go environment file.
func TestAgreesWithGo(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".config", "go"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "go", "env"), []byte("GOMODCACHE="+home+"/modcache\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.GoTelemetryOff(t, home)
	env := map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}
	cmd := exec.Command(goBin, "env", "GOCACHE", "GOMODCACHE")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	fromGo := strings.Fields(string(out))
	got := paths(Dirs(home, func(k string) string { return env[k] }))
	if !slices.Equal(got[:2], fromGo) {
		t.Errorf("Dirs says %q, go env says %q", got[:2], fromGo)
	}
}
