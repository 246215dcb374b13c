// Package toolcache finds the cache directories of the usual development
// tools (Go, pip, npm, cargo) where those tools would look for them, so
// that a sandbox can let builds write their caches and keep them warm from
// one session to the next. It reads the environment and Go's environment
// file; it runs no tool.
package toolcache

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Dir is one cache directory.
type Dir struct {
	// Tool names what it is, such as "go build cache".
	Tool string
	// Command is the program that uses it, such as "go".
	Command string
	// Path is the directory, absolute.
	Path string
}

// Dirs returns the cache directories of a user whose home directory is home
// and whose environment getenv reads, in a fixed order. A tool whose cache
// is turned off (GOCACHE=off) or set to a relative path has none.
func Dirs(home string, getenv func(string) string) []Dir {
	cacheHome := absOr(getenv("XDG_CACHE_HOME"), filepath.Join(home, ".cache"))
	configHome := absOr(getenv("XDG_CONFIG_HOME"), filepath.Join(home, ".config"))
	goenv := goEnv(getenv, configHome)

	var out []Dir
	add := func(tool, command, path string) {
		if filepath.IsAbs(path) {
			out = append(out, Dir{Tool: tool, Command: command, Path: filepath.Clean(path)})
		}
	}
	if c := goenv("GOCACHE"); c != "off" {
		add("go build cache", "go", orDefault(c, filepath.Join(cacheHome, "go-build")))
	}
	gopath := orDefault(goenv("GOPATH"), filepath.Join(home, "go"))
	gopath, _, _ = strings.Cut(gopath, string(filepath.ListSeparator))
	add("go module cache", "go", orDefault(goenv("GOMODCACHE"), filepath.Join(gopath, "pkg", "mod")))
	add("go checksum database", "go", filepath.Join(gopath, "pkg", "sumdb"))
	add("pip cache", "python3", orDefault(getenv("PIP_CACHE_DIR"), filepath.Join(cacheHome, "pip")))
	add("npm cache", "npm", orDefault(getenv("npm_config_cache"), orDefault(getenv("NPM_CONFIG_CACHE"), filepath.Join(home, ".npm"))))
	cargo := orDefault(getenv("CARGO_HOME"), filepath.Join(home, ".cargo"))
	add("cargo registry", "cargo", filepath.Join(cargo, "registry"))
	add("cargo git checkouts", "cargo", filepath.Join(cargo, "git"))
	return out
}

// goEnv returns a lookup of Go's settings as the go command resolves
// them: the environment first, then the go environment file (GOENV, by
// default go/env in the user's configuration directory).
func goEnv(getenv func(string) string, configHome string) func(string) string {
	file := getenv("GOENV")
	if file == "" {
		file = filepath.Join(configHome, "go", "env")
	}
	values := map[string]string{}
	if file != "off" {
		values = readEnvFile(file)
	}
	return func(key string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return values[key]
	}
}

// readEnvFile reads KEY=VALUE lines; a missing or unreadable file is empty.
func readEnvFile(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && k != "" && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// absOr returns v when it is an absolute path, def otherwise (the XDG
// rule: a relative value is ignored).
func absOr(v, def string) string {
	if filepath.IsAbs(v) {
		return v
	}
	return def
}
