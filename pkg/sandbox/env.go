package sandbox

import (
	"cmp"
	"os"
	"path"
	"strings"
)

// baseEnv builds the environment every process of the runner starts with:
// the allowlisted variables of the service that no deny pattern names, then
// the runner's own.
func baseEnv(cfg Config, id identity, tempDir string) []string {
	var env []string
	hasPath := false
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !allowed(cfg.EnvAllowlist, k) || envDenied(cfg.EnvDenylist, k) {
			continue
		}
		if k == "PATH" {
			hasPath = true
		}
		env = append(env, kv)
	}
	if !hasPath {
		env = append(env, "PATH="+defaultPath)
	}
	own := []string{"HOME=" + cmp.Or(cfg.Home, tempDir), "TMPDIR=" + tempDir}
	if id.name != "" {
		own = append(own, "USER="+id.name, "LOGNAME="+id.name)
	}
	if lookEnv(env, "SHELL") == "" {
		own = append(own, "SHELL="+Shell)
	}
	return mergeEnv(env, own)
}

// Shell is the shell the Bash tool and hooks run commands in, and SHELL for
// processes whose environment names none. Without SHELL, bash looks the
// user up in the password database at every start (nscd, nsswitch.conf,
// /etc/passwd), and programs that start "the user's shell" have none.
const Shell = "/bin/bash"

// envDenied reports whether a deny pattern names key.
func envDenied(deny []string, key string) bool {
	key = strings.ToUpper(key)
	for _, pat := range deny {
		if ok, _ := path.Match(pat, key); ok {
			return true
		}
	}
	return false
}

func allowed(allow []string, key string) bool {
	for _, a := range allow {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(key, p) {
				return true
			}
		} else if a == key {
			return true
		}
	}
	return false
}

// mergeEnv returns base with extra on top; a later entry replaces an
// earlier one with the same name.
func mergeEnv(base, extra []string) []string {
	if len(extra) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(extra))
	index := make(map[string]int, len(base)+len(extra))
	for _, kv := range append(append([]string(nil), base...), extra...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// lookEnv returns the value of key in env.
func lookEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
