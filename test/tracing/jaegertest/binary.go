// Package jaegertest runs Jaeger v2 as a test's tracing backend and reads
// traces back from its query API.
//
// Start runs the binary that scripts/jaeger builds with toolwire's
// configuration (deploy/jaeger/config.yaml) on free loopback ports, one
// instance per test, and stops it when the test ends. Client talks to the
// query service of any Jaeger v2, the test's own or one in a container, and
// turns what it returns into a Trace of Spans that tests can walk.
//
// It is for tests only and imports package testing. It never skips: a test
// that needs Jaeger fails when the binary is missing, saying how to build it.
//
// Why one package of this size (about 950 lines): starting Jaeger and
// reading its query API are one test fixture, and the trace model tests
// walk is the shape that API returns.
package jaegertest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvBinary names the environment variable that gives the Jaeger binary's
// path; scripts/test sets it from scripts/jaeger.
const EnvBinary = "TOOLWIRE_JAEGER"

// jaegerModule is the Go module the binary is built from.
const jaegerModule = "github.com/jaegertracing/jaeger"

// Binary returns the Jaeger binary to run: $TOOLWIRE_JAEGER when set,
// otherwise the one scripts/jaeger caches for the version tools/jaeger/go.mod
// requires. It fails the test, saying to run scripts/jaeger, when neither
// exists.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := FindBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// FindBinary is Binary for callers without a testing.TB, such as TestMain.
func FindBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("$%s: %w; run scripts/jaeger to build Jaeger and set %s to the path it prints", EnvBinary, err, EnvBinary)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p, err := CachePath(root)
	if err != nil {
		return "", err
	}
	if err := executable(p); err != nil {
		return "", fmt.Errorf("no Jaeger binary: $%s is not set and %v.\n"+
			"Run scripts/jaeger from the repository root: it builds Jaeger once (10 to 30 minutes) into that path", EnvBinary, err)
	}
	return p, nil
}

// executable checks that p is a regular file someone may execute.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// CachePath returns where scripts/jaeger puts the binary:
// $XDG_CACHE_HOME (or ~/.cache)/toolwire/jaeger-<version>/jaeger, with the
// version tools/jaeger/go.mod under root requires.
func CachePath(root string) (string, error) {
	version, err := ModuleVersion(root)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locate the cache directory scripts/jaeger builds into: %w", err)
	}
	return filepath.Join(cache, "toolwire", "jaeger-"+version, "jaeger"), nil
}

// ModuleVersion returns the version of Jaeger's Go module that
// tools/jaeger/go.mod under root requires, read the way scripts/jaeger reads
// it: the first line whose first two fields are the module path and a
// version.
func ModuleVersion(root string) (string, error) {
	name := filepath.Join(root, "tools", "jaeger", "go.mod")
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == jaegerModule && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return "", fmt.Errorf("%s does not require %s", name, jaegerModule)
}

// toolwireModule is the module path of the repository's go.mod.
const toolwireModule = "github.com/toolwire/toolwire"

// modulePath returns the path of a go.mod's module directive.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`)
		}
	}
	return ""
}

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory whose go.mod declares toolwire's module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == toolwireModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the repository root (go.mod of github.com/toolwire/toolwire) is not above the working directory")
		}
		dir = parent
	}
}
