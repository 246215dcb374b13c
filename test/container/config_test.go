package container_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullProtection is what toolsvc enforces with the recommended flags.
// PROTECTION_RESOURCE_LIMITS is not among them: the suite gives toolsvc no
// --limit-* flags, so the container's limits stand in (see
// docs/security.md).
var fullProtection = []string{
	"PROTECTION_FILE_ROOTS",
	"PROTECTION_LANDLOCK_FS",
	"PROTECTION_LANDLOCK_SCOPE",
	"PROTECTION_NO_NEW_PRIVS",
	"PROTECTION_NETWORK_ISOLATION",
	"PROTECTION_PROCESS_TREE",
	"PROTECTION_UNPRIVILEGED_USER",
	"PROTECTION_PID_ISOLATION",
	"PROTECTION_CLEAN_ENVIRONMENT",
}

// withoutFlag returns securityFlags without the pairs matching drop, plus
// extra.
func withoutFlag(drop [2]string, extra ...string) []string {
	var kept [][2]string
	for _, p := range securityFlags {
		if p != drop {
			kept = append(kept, p)
		}
	}
	return append(flagArgs(kept), extra...)
}

// TestEnforcedByConfiguration starts toolsvc under weaker container
// configurations and checks what it does: refuse to start, refuse sessions,
// or serve and say in its Hello which protections are missing.
func TestEnforcedByConfiguration(t *testing.T) {
	f := env(t)
	noLandlock := filepath.Join(t.TempDir(), "seccomp-no-landlock.json")
	// Allows everything except Landlock, which fails with ENOSYS the way
	// it does under seccomp profiles written before Landlock existed.
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["landlock_create_ruleset","landlock_add_rule","landlock_restrict_self"],"action":"SCMP_ACT_ERRNO","errnoRet":38}]}`
	if err := os.WriteFile(noLandlock, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		docker      []string // docker run flags besides limitFlags
		args        []string // extra toolsvc flags
		wantRefusal string   // toolsvc exits at start, logging this
		want        []string // enforced must hold these
		wantNot     []string // and none of these
		wantUID     string   // tools run as this uid; empty: a session user's
		escapees    bool     // check that a setsid child dies with a timed-out call
	}{
		{
			name:        "docker defaults",
			wantRefusal: `a private network namespace for network "none": operation not permitted (needs CAP_SYS_ADMIN)`,
		},
		{
			name:        "seccomp profile without Landlock",
			docker:      append(flagArgs(securityFlags), "--security-opt", "seccomp="+noLandlock),
			wantRefusal: "Landlock is disabled or not built in",
		},
		{
			name:        "no NET_ADMIN",
			docker:      withoutFlag([2]string{"--cap-add", "NET_ADMIN"}),
			wantRefusal: "loopback up: operation not permitted (needs CAP_NET_ADMIN)",
		},
		{
			// The network namespace is not needed; the session users'
			// mount namespace still is.
			name:        "no SYS_ADMIN, tools on the container's network",
			docker:      withoutFlag([2]string{"--cap-add", "SYS_ADMIN"}),
			args:        []string{"--network", "host"},
			wantRefusal: "a user of its own for each session: mount namespace: operation not permitted (needs CAP_SYS_ADMIN)",
		},
		{
			// No writable cgroup: a session user's calls are killed whole
			// through the group that marks them.
			name:     "host cgroup namespace",
			docker:   withoutFlag([2]string{"--cgroupns", "private"}, "--cgroupns", "host"),
			want:     []string{"PROTECTION_LANDLOCK_FS", "PROTECTION_NETWORK_ISOLATION", "PROTECTION_PROCESS_TREE", "PROTECTION_PID_ISOLATION"},
			wantNot:  []string{"PROTECTION_PROCESS_GROUP"},
			escapees: true,
		},
		{
			// One user for all sessions, as before session users: the
			// fallback kills process groups only.
			name:    "one user for all sessions, host cgroup namespace",
			docker:  withoutFlag([2]string{"--cgroupns", "private"}, "--cgroupns", "host"),
			args:    []string{"--run-as", "tool"},
			want:    []string{"PROTECTION_LANDLOCK_FS", "PROTECTION_UNPRIVILEGED_USER", "PROTECTION_PROCESS_GROUP"},
			wantNot: []string{"PROTECTION_PROCESS_TREE", "PROTECTION_PID_ISOLATION"},
			wantUID: toolUID,
		},
		{
			name:    "one user for all sessions",
			docker:  flagArgs(securityFlags),
			args:    []string{"--run-as", "tool"},
			want:    []string{"PROTECTION_LANDLOCK_FS", "PROTECTION_PROCESS_TREE", "PROTECTION_UNPRIVILEGED_USER"},
			wantNot: []string{"PROTECTION_PID_ISOLATION"},
			wantUID: toolUID,
		},
		{
			name:    "sandbox none, explicitly",
			docker:  flagArgs(securityFlags),
			args:    []string{"--sandbox", "none"},
			want:    []string{"PROTECTION_NETWORK_ISOLATION", "PROTECTION_PROCESS_TREE", "PROTECTION_UNPRIVILEGED_USER", "PROTECTION_PID_ISOLATION"},
			wantNot: []string{"PROTECTION_LANDLOCK_FS", "PROTECTION_LANDLOCK_SCOPE"},
		},
		{
			name:    "tools on the container's network",
			docker:  flagArgs(securityFlags),
			args:    []string{"--network", "host"},
			want:    []string{"PROTECTION_LANDLOCK_FS", "PROTECTION_PROCESS_TREE"},
			wantNot: []string{"PROTECTION_NETWORK_ISOLATION"},
		},
		{
			name: "recommended flags (the main container)",
			want: fullProtection,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			addr, name := f.addr, f.container
			if tt.want == nil || tt.docker != nil {
				name = f.runID + "-config-" + string(rune('a'+i))
				t.Cleanup(func() { _, _ = docker(context.Background(), "rm", "-f", name) })
				flags := append(append([]string(nil), tt.docker...), flagArgs(limitFlags)...)
				if tt.wantRefusal != "" {
					f.wantRefusal(ctx, t, name, flags, tt.args, tt.wantRefusal)
					return
				}
				var err error
				if addr, err = f.start(ctx, name, flags, tt.args...); err != nil {
					t.Fatal(err)
				}
			}
			r, err := f.tryRun(t, callOpts{addr: addr}, "Bash", map[string]any{"command": "id -u"})
			if err != nil {
				t.Fatal(err)
			}
			wantOK(t, r)
			if tt.wantUID == "" {
				wantSessionUID(t, r.Content)
			} else if r.Content != tt.wantUID {
				t.Errorf("tools run as uid %s, want %s", r.Content, tt.wantUID)
			}
			t.Logf("enforced: %s", strings.Join(r.enforced, " "))
			for _, p := range tt.want {
				if !slices.Contains(r.enforced, p) {
					t.Errorf("Hello does not report %s", p)
				}
			}
			for _, p := range tt.wantNot {
				if slices.Contains(r.enforced, p) {
					t.Errorf("Hello reports %s, which this configuration cannot give", p)
				}
			}
			if tt.escapees {
				r, err := f.tryRun(t, callOpts{addr: addr}, "Bash", map[string]any{"command": "(setsid sleep 4646 &); bash -c '(setsid bash -c \"sleep 4747 & wait\" &)'; sleep 600", "timeout": 2000})
				if err != nil {
					t.Fatal(err)
				}
				wantError(t, r, "Command timed out after 2s")
				ps, err := docker(ctx, "exec", name, "ps", "-eo", "stat=,args=")
				if err != nil {
					t.Fatal(err)
				}
				for _, marker := range []string{"sleep 4646", "sleep 4747", "sleep 600"} {
					if strings.Contains(ps, marker) {
						t.Errorf("%s survived the timeout:\n%s", marker, ps)
					}
				}
			}
		})
	}
}

// wantRefusal runs a container that must exit with an error at start and
// log refusal.
func (f *fixture) wantRefusal(ctx context.Context, t *testing.T, name string, dockerArgs, toolsvcArgs []string, refusal string) {
	t.Helper()
	if _, err := docker(ctx, f.runArgs(name, dockerArgs, toolsvcArgs)...); err != nil {
		t.Fatal(err)
	}
	code, err := docker(ctx, "wait", name)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := dockerAll(ctx, "logs", name)
	if code == "0" {
		t.Errorf("toolsvc exited 0, want a refusal; logs:\n%s", logs)
	}
	if !strings.Contains(logs, "cannot enforce the configured policy") || !strings.Contains(logs, refusal) {
		t.Errorf("toolsvc logs do not explain the refusal with %q:\n%s", refusal, logs)
	}
}

// TestDocsRecommendTestedFlags keeps docs/security.md and this suite in
// step: the docker run command the document recommends carries every
// security flag the suite validated, and names every limit option it uses.
func TestDocsRecommendTestedFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, p := range securityFlags {
		want := strings.TrimSpace(p[0] + " " + p[1])
		if !strings.Contains(doc, want) {
			t.Errorf("docs/security.md does not recommend %q", want)
		}
	}
	for _, p := range limitFlags {
		want := p[0] + " "
		switch p[0] {
		case "--tmpfs", "--ulimit":
			want += p[1][:strings.IndexAny(p[1], ":=")+1]
		}
		if !strings.Contains(doc, want) {
			t.Errorf("docs/security.md does not name %q", want)
		}
	}
	for _, want := range append([]string{"dst=" + secretsDir + ",readonly"}, serveArgs...) {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/security.md does not show %q", want)
		}
	}
}
