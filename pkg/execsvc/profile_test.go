package execsvc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// devHome makes a home directory with a program, a key, a secret named in
// settings, an npmrc and a plain file, and clears the variables that
// would move the tool caches elsewhere.
func devHome(t *testing.T) string {
	t.Helper()
	for _, k := range []string{"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "GOENV", "GOCACHE", "GOMODCACHE", "GOPATH", "PIP_CACHE_DIR", "npm_config_cache", "NPM_CONFIG_CACHE", "CARGO_HOME"} {
		t.Setenv(k, "")
	}
	home := sandboxtest.Dir(t)
	for name, content := range map[string]string{
		".local/bin/hello":   "#!/bin/sh\necho hello from home\n",
		".ssh/id_x":          "PRIVATE KEY\n",
		"private/x":          "private\n",
		".npmrc":             "//registry/:_authToken=t\n",
		"notes.txt":          "notes\n",
		".cache/extra/.keep": "",
	} {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func devConfig(t *testing.T, home string) Config {
	return Config{
		Root:     sandboxtest.Dir(t),
		TempRoot: t.TempDir(),
		Profile:  ProfileDevelopment,
		Home:     home,
		Sandbox:  sandbox.Config{RunAsUser: "0:0"},
		SandboxSettings: settings.Sandbox{
			AllowWrite: []string{"~/.cache/extra", "~/.cache/missing"},
			DenyRead:   []string{"~/private/**"},
		},
	}
}

func TestDevelopmentProfile(t *testing.T) {
	home := devHome(t)
	added := sandboxtest.Dir(t)
	cfg := devConfig(t, home)
	cfg.AddDirs = []string{added}
	env, info := openEnv(t, factoryOf(t, cfg, nil), "dev", "")
	if info.Network != sandbox.NetworkHost {
		t.Errorf("network %q, want host by default", info.Network)
	}
	cases := []struct {
		script, want string
	}{
		{"$HOME/.local/bin/hello", "hello from home"},
		{"cat ~/.ssh/id_x", "Permission denied"},
		{"cat ~/private/x", "Permission denied"},
		{"cat ~/.npmrc", "Permission denied"},
		{"touch ~/new", "Permission denied"},
		{"echo a > " + added + "/from-bash && cat " + added + "/from-bash", "a\n"},
		{"echo e > ~/.cache/extra/probe && echo wrote allowWrite", "wrote allowWrite"},
		{"echo x > ~/.cache/other 2>&1; echo $?", "Permission denied"},
	}
	// The caches of the tools installed here.
	for _, c := range []struct{ command, dir string }{
		{"go", ".cache/go-build"}, {"go", "go/pkg/mod"}, {"python3", ".cache/pip"}, {"npm", ".npm"}, {"cargo", ".cargo/registry"}, {"cargo", ".cargo/git"},
	} {
		if _, err := exec.LookPath(c.command); err == nil {
			cases = append(cases, struct{ script, want string }{"echo x > ~/" + c.dir + "/probe && echo wrote " + c.dir, "wrote " + c.dir})
		}
	}
	for _, c := range cases {
		if out := bash(t, env, c.script); !strings.Contains(out, c.want) || strings.HasPrefix(c.want, "wrote") && out != c.want+"\n" {
			t.Errorf("%s: %q, want %q", c.script, out, c.want)
		}
	}
	// The file tools use the same deny list, and may read the rest.
	for _, p := range []string{"~/.ssh/id_x", home + "/private/x", home + "/.npmrc"} {
		var de *workspace.DeniedError
		if _, err := env.Files.Resolve(p, ""); !errors.As(err, &de) || !strings.Contains(de.Msg, "protected-file pattern") {
			t.Errorf("Read %s: %v, want a protected-file refusal", p, err)
		}
	}
	if p, err := env.Files.Resolve(home+"/notes.txt", ""); err != nil || p.Writable {
		t.Errorf("Read ~/notes.txt: %+v %v, want readable, not writable", p, err)
	}
	if p, err := env.Files.Resolve(added+"/f", ""); err != nil || !p.Writable {
		t.Errorf("Write in the added directory: %+v %v, want writable", p, err)
	}
}

func TestAllowReadOpensDenied(t *testing.T) {
	home := devHome(t)
	cfg := devConfig(t, home)
	cfg.SandboxSettings.AllowRead = []string{"~/.npmrc"}
	env, _ := openEnv(t, factoryOf(t, cfg, nil), "s", "")
	if out := bash(t, env, "cat ~/.npmrc"); !strings.Contains(out, "_authToken") {
		t.Errorf("cat ~/.npmrc with allowRead: %q", out)
	}
	if _, err := env.Files.Resolve("~/.npmrc", ""); err != nil {
		t.Errorf("Read ~/.npmrc with allowRead: %v", err)
	}
	if out := bash(t, env, "cat ~/.ssh/id_x"); !strings.Contains(out, "Permission denied") {
		t.Errorf("the rest of the list still holds: %q", out)
	}
}

func TestDenyWriteInsideWritable(t *testing.T) {
	home := devHome(t)
	cfg := devConfig(t, home)
	cfg.SandboxSettings.DenyWrite = []string{"./.git/hooks", "~/.bashrc"}
	_, _, err := factoryOf(t, cfg, nil)(t.Context(), executor.EnvRequest{SessionID: "s"})
	if err == nil || !strings.Contains(err.Error(), "denyWrite: "+filepath.Join(cfg.Root, ".git/hooks")) {
		t.Fatalf("got %v, want a refusal naming the denyWrite entry in the workspace", err)
	}
	cfg.SandboxSettings.DenyWrite = []string{"~/.bashrc"} // not writable anyway: holds
	env, _ := openEnv(t, factoryOf(t, cfg, nil), "s2", "")
	if out := bash(t, env, "echo x >> ~/.bashrc"); !strings.Contains(out, "Permission denied") {
		t.Errorf("~/.bashrc written: %q", out)
	}
}

func TestServiceProfileStaysStrict(t *testing.T) {
	home := devHome(t)
	cfg := Config{Root: sandboxtest.Dir(t), TempRoot: t.TempDir(), Home: home, Sandbox: sandbox.Config{RunAsUser: "0:0"}}
	env, info := openEnv(t, factoryOf(t, cfg, nil), "svc", "")
	if info.Network != sandbox.NetworkNone {
		t.Errorf("network %q, want none", info.Network)
	}
	if out := bash(t, env, `echo "$HOME"; cat `+home+`/notes.txt`); !strings.HasPrefix(out, env.TempDir+"\n") || !strings.Contains(out, "Permission denied") {
		t.Errorf("service profile: %q, want HOME in the temp dir and the user's files out of reach", out)
	}
	if _, err := env.Files.Resolve(home+"/notes.txt", ""); err == nil {
		t.Error("the file tools reach the home directory in the service profile")
	}
}

func TestUnknownProfileAndBadAddDir(t *testing.T) {
	for name, cfg := range map[string]Config{
		"profile":          {Root: t.TempDir(), Profile: "laptop"},
		"relative add-dir": {Root: t.TempDir(), AddDirs: []string{"rel"}},
		"missing add-dir":  {Root: t.TempDir(), AddDirs: []string{"/does/not/exist"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCachesOfInstalledToolsOnly: a missing cache directory is made only
// for a tool that is installed; one that exists is granted either way.
func TestCachesOfInstalledToolsOnly(t *testing.T) {
	home := devHome(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	got := cacheDirs(home, nil)
	want := []string{filepath.Join(home, ".cache/go-build"), filepath.Join(home, "go/pkg/mod"), filepath.Join(home, "go/pkg/sumdb"), filepath.Join(home, ".npm")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cacheDirs = %q\nwant %q", got, want)
	}
	for _, d := range []string{".cache/pip", ".cargo"} {
		if _, err := os.Stat(filepath.Join(home, d)); err == nil {
			t.Errorf("~/%s was made for a tool that is not installed", d)
		}
	}
}
