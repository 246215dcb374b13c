package workspace

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/toolwire/toolwire/pkg/workspace/glob"
)

// Config describes the directories a session may use.
type Config struct {
	// Dir is the session's working directory, absolute; it is read-write.
	Dir string
	// ReadWrite are further absolute directories the session may change.
	ReadWrite []string
	// ReadOnly are absolute directories the session may only read.
	ReadOnly []string
	// Deny are glob patterns of paths refused even inside the roots, matched
	// against absolute paths ("**" spans directories, wildcards match dot
	// files). A pattern starting with "~/" is anchored at Home; one without
	// a leading "/", "~/" or "**/" matches at any depth. Nil means
	// DefaultDeny(); an empty, non-nil slice denies nothing. The sandbox
	// keeps processes out of the same list (see DenyLocations).
	Deny []string
	// Home is the home directory "~" stands for, in paths and deny
	// patterns; empty means the service's own ($HOME).
	Home string
	// AllowHardLinks lets files with more than one hard link be read and
	// written.
	AllowHardLinks bool
	// Durable makes every write fsync the new file before renaming it into
	// place, so a write survives a power loss, at about a millisecond per
	// write. Without it writes are still atomic (a crash leaves the old or
	// the new content, never a torn file), which is what editors and
	// Claude Code give.
	Durable bool
	// Logger receives a debug record for each refusal. Nil discards.
	Logger *slog.Logger
}

// DefaultDeny returns the deny patterns used when Config.Deny is nil: keys,
// credentials and secrets files that a coding agent has no business reading,
// for the file tools and, where DenyLocations can place them, for processes.
// Names that are secret wherever they are (".ssh", ".aws", ".netrc", key
// files) match at any depth; files that hold secrets only in a home
// directory (".npmrc", browser profiles) are anchored there ("~/"), so a
// project's own .npmrc stays editable.
func DefaultDeny() []string {
	return []string{
		"**/.ssh/**",
		"**/.gnupg/**",
		"**/.aws/**",
		"**/.azure/**",
		"**/.config/gcloud/**",
		"**/.kube/config",
		"~/.kube/**",
		"**/.docker/config.json",
		"**/.local/share/keyrings/**",
		"**/.password-store/**",
		"**/.netrc",
		"**/.git-credentials",
		"**/.config/git/credentials",
		"**/.config/gh/hosts.yml",
		"**/.pypirc",
		"**/.cargo/credentials",
		"**/.cargo/credentials.toml",
		"**/.gem/credentials",
		"**/.vault-token",
		"**/.claude/.credentials.json",
		"~/.npmrc",
		"~/.mozilla/**",
		"~/.config/google-chrome/**",
		"~/.config/chromium/**",
		"**/.env",
		"**/*.pem",
		"**/*.p12",
		"**/*.pfx",
		"**/id_rsa*",
		"**/id_dsa*",
		"**/id_ecdsa*",
		"**/id_ed25519*",
		"/etc/shadow",
		"/etc/shadow-",
		"/etc/gshadow",
		"/etc/gshadow-",
		"/etc/sudoers",
		"/etc/sudoers.d/**",
		"/etc/ssh/ssh_host_*key",
		"/etc/ssl/private/**",
		"/run/secrets/**",
	}
}

// anchorPattern returns pattern as the workspace matches it: "~/" replaced
// by home, and a pattern without an anchor made to match at any depth.
func anchorPattern(pattern, home string) string {
	switch {
	case pattern == "~" || strings.HasPrefix(pattern, "~/"):
		return strings.TrimSuffix(home, "/") + pattern[1:]
	case strings.HasPrefix(pattern, "/"), strings.HasPrefix(pattern, "**/"):
		return pattern
	}
	return "**/" + pattern
}

// homeDir returns home, or the service's home directory when empty.
func homeDir(home string) string {
	if home != "" {
		return home
	}
	h, _ := os.UserHomeDir()
	return h
}

// DenyLocations returns the places of the file system that deny patterns
// name, for keeping processes out of them: the sandbox cannot match
// patterns, only refuse paths. An anchored pattern ("/etc/shadow",
// "~/.npmrc", "/etc/ssh/ssh_host_*key") names its path; one that matches at
// any depth ("**/.ssh/**", "**/id_rsa*") is placed in each of homes, the
// home directories. A trailing "/**" names the directory itself. Segments
// with wildcards are matched against what the directory holds now;
// literal paths are returned whether they exist or not, so that one made
// later is still kept out. A pattern with "**" or "{" elsewhere (say
// "/srv/**/*.key") has no place and guards the file tools only.
func DenyLocations(patterns []string, home string, homes []string) []string {
	home = homeDir(home)
	seen := map[string]bool{}
	var out []string
	for _, pat := range patterns {
		pat = anchorPattern(pat, home)
		anchors := []string{"/"}
		if rest, ok := strings.CutPrefix(pat, "**/"); ok {
			anchors, pat = homes, rest
		}
		segs := strings.Split(strings.Trim(pat, "/"), "/")
		if segs[len(segs)-1] == "**" {
			segs = segs[:len(segs)-1]
		}
		if slices.Contains(segs, "**") || strings.Contains(pat, "{") {
			continue
		}
		cur := anchors
		for _, seg := range segs {
			var next []string
			for _, dir := range cur {
				if !strings.ContainsAny(seg, `*?[\`) {
					next = append(next, filepath.Join(dir, seg))
					continue
				}
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if ok, _ := path.Match(seg, e.Name()); ok {
						next = append(next, filepath.Join(dir, e.Name()))
					}
				}
			}
			cur = next
		}
		for _, p := range cur {
			if !seen[p] && p != "/" {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// Workspace is the set of directories one session's file tools may reach.
// Its methods may be called from many goroutines at once, except Close,
// which must come after every other call has returned.
type Workspace struct {
	dir            string
	roots          []*root // longest path first
	deny           glob.Set
	allowHardLinks bool
	durable        bool
	log            *slog.Logger
	home           string // what "~" stands for
	escapeErr      error  // what os.Root returns for a path leaving it
}

// root is one allowed directory.
type root struct {
	path     string // as configured, clean and absolute
	real     string // path with symbolic links resolved, when it differs
	writable bool
	fs       *os.Root
	// dir is the directory opened O_PATH for the direct path (direct.go),
	// and dirConn its descriptor's RawConn; both nil when unavailable. Close
	// closes dir and sets it to nil; dirConn then fails.
	dir     *os.File
	dirConn syscall.RawConn
}

// Root describes one allowed directory.
type Root struct {
	// Path is the directory's absolute path.
	Path string
	// Writable is false for read-only roots.
	Writable bool
}

// New opens the roots of cfg. The caller must Close the Workspace.
func New(cfg Config) (*Workspace, error) {
	w := &Workspace{allowHardLinks: cfg.AllowHardLinks, durable: cfg.Durable, log: cfg.Logger}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.home = homeDir(cfg.Home)
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("workspace: working directory %q is not an absolute path", cfg.Dir)
	}
	w.dir = filepath.Clean(cfg.Dir)
	add := func(dir string, writable bool) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("workspace: root %q is not an absolute path", dir)
		}
		dir = filepath.Clean(dir)
		for _, r := range w.roots {
			if r.path == dir {
				// Listed twice: read-only wins, it was asked for explicitly.
				r.writable = r.writable && writable
				return nil
			}
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return fmt.Errorf("workspace: root %s: %w", dir, err)
		}
		fsys, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("workspace: open root: %w", err)
		}
		r := &root{path: dir, writable: writable, fs: fsys}
		r.dir, r.dirConn = openRootDir(dir)
		if real != dir {
			r.real = real
		}
		w.roots = append(w.roots, r)
		return nil
	}
	var err error
	for _, d := range slices.Concat([]string{w.dir}, cfg.ReadWrite) {
		if err = add(d, true); err != nil {
			break
		}
	}
	for _, d := range cfg.ReadOnly {
		if err != nil {
			break
		}
		err = add(d, false)
	}
	if err == nil {
		err = w.compileDeny(cfg.Deny)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	// os.Root does not export its "path escapes" error; learn it once.
	if _, err := w.roots[0].fs.Lstat(".."); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			w.escapeErr = pe.Err
		}
	}
	slices.SortStableFunc(w.roots, func(a, b *root) int { return cmp.Compare(len(b.path), len(a.path)) })
	return w, nil
}

func (w *Workspace) compileDeny(patterns []string) error {
	if patterns == nil {
		patterns = DefaultDeny()
	}
	for _, s := range patterns {
		s = anchorPattern(s, w.home)
		p, err := glob.Compile(s, glob.MatchDot())
		if err != nil {
			return fmt.Errorf("workspace: deny pattern: %w", err)
		}
		w.deny = append(w.deny, p)
	}
	return nil
}

// Close releases the roots. It is idempotent.
func (w *Workspace) Close() error {
	var errs []error
	for _, r := range w.roots {
		if r.fs != nil {
			errs = append(errs, r.fs.Close())
			r.fs = nil
		}
		if r.dir != nil {
			// dirConn stays: once the file is closed its Control fails,
			// and an open racing with Close falls back to the walk.
			errs = append(errs, r.dir.Close())
			r.dir = nil
		}
	}
	return errors.Join(errs...)
}

// Dir returns the absolute path of the session's working directory.
func (w *Workspace) Dir() string { return w.dir }

// Home returns the directory "~" stands for in paths Resolve takes.
func (w *Workspace) Home() string { return w.home }

// Abs returns path as Resolve takes it, clean and absolute: a leading "~"
// stands for home (when home is set) and a relative path is relative to
// cwd. Whatever judges a file tool's path (the permission rules) must
// use it too, or it would judge another file than the tool opens.
func Abs(path, cwd, home string) string {
	if home != "" && (path == "~" || strings.HasPrefix(path, "~/")) {
		path = home + path[1:]
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	return filepath.Clean(path)
}

// Roots returns the allowed directories, most specific first.
func (w *Workspace) Roots() []Root {
	out := make([]Root, len(w.roots))
	for i, r := range w.roots {
		out[i] = Root{Path: r.path, Writable: r.writable}
	}
	return out
}

// DenyPatterns returns the deny patterns in effect, each anchored at "/"
// or starting with "**/".
func (w *Workspace) DenyPatterns() []string {
	out := make([]string, len(w.deny))
	for i, p := range w.deny {
		out[i] = p.String()
	}
	return out
}

// Denied returns the deny pattern that abs, an absolute path, matches.
func (w *Workspace) Denied(abs string) (pattern string, ok bool) {
	if p, ok := w.deny.Match(filepath.ToSlash(abs)); ok {
		return p.String(), true
	}
	return "", false
}

// Path is a resolved path inside one of the workspace's roots.
type Path struct {
	// Abs is the clean absolute path, as named (symbolic links not resolved).
	Abs string
	// Root is the root directory Abs lies in.
	Root string
	// Rel is Abs relative to Root, "." for the root itself.
	Rel string
	// Writable reports whether the root may be changed.
	Writable bool

	root *root
}

// Resolve turns path, absolute or relative to cwd (the working directory
// when empty), into a Path. "~" stands for the home directory. It fails
// with a *DeniedError when the path is outside every root or matches a deny
// pattern. It does not touch the file system beyond what New opened.
func (w *Workspace) Resolve(path, cwd string) (Path, error) {
	if path == "" {
		return Path{}, errors.New("workspace: empty path")
	}
	if cwd == "" {
		cwd = w.dir
	}
	abs := Abs(path, cwd, w.home)
	r, rel := w.rootOf(abs)
	if r == nil {
		return Path{}, w.refuseWhy(abs, fmt.Sprintf("is outside the directories this session may use (%s).", w.rootList()))
	}
	if pat, ok := w.Denied(abs); ok {
		return Path{}, w.refuseWhy(abs, fmt.Sprintf("matches the protected-file pattern %q.", pat))
	}
	return Path{Abs: abs, Root: r.path, Rel: rel, Writable: r.writable, root: r}, nil
}

// rootOf returns the most specific root holding abs, and abs relative to
// it. A root has two names when its configured path goes through a link;
// abs may use either, and a root nested inside is found under both.
func (w *Workspace) rootOf(abs string) (*root, string) {
	r, name, rel := w.longestMatch(abs)
	if r == nil {
		return nil, ""
	}
	for _, alias := range []string{r.path, r.real} {
		if alias == "" || alias == name {
			continue
		}
		if nested, _, nrel := w.longestMatch(filepath.Join(alias, filepath.FromSlash(rel))); nested != nil && nested != r {
			return nested, nrel
		}
	}
	return r, rel
}

// longestMatch returns the root with the longest name that holds abs.
func (w *Workspace) longestMatch(abs string) (best *root, bestName, bestRel string) {
	for _, r := range w.roots {
		for _, name := range []string{r.path, r.real} {
			if name == "" || len(name) <= len(bestName) {
				continue
			}
			if rel, ok := within(abs, name); ok {
				best, bestName, bestRel = r, name, rel
			}
		}
	}
	return best, bestName, bestRel
}

// within reports whether abs is dir or lies below it, and returns abs
// relative to dir ("." for dir itself), slash-separated.
func within(abs, dir string) (string, bool) {
	if abs == dir {
		return ".", true
	}
	rest, ok := strings.CutPrefix(abs, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
	return filepath.ToSlash(rest), ok
}

func (w *Workspace) rootList() string {
	parts := make([]string, len(w.roots))
	for i, r := range w.roots {
		mode := "read-write"
		if !r.writable {
			mode = "read-only"
		}
		parts[i] = r.path + " (" + mode + ")"
	}
	return strings.Join(parts, ", ")
}

func (w *Workspace) writableList() string {
	var parts []string
	for _, r := range w.roots {
		if r.writable {
			parts = append(parts, r.path)
		}
	}
	return strings.Join(parts, ", ")
}

// DeniedError is a path the workspace refused. Msg explains the refusal in
// words meant for the model.
type DeniedError struct {
	// Path is the absolute path that was refused.
	Path string
	// Msg names the path and the reason.
	Msg string

	why string // the reason alone, when it reads "it <why>"
}

// Error returns Msg.
func (e *DeniedError) Error() string { return e.Msg }

// reason returns the refusal's reason as a clause that can follow "it" or
// "which".
func (e *DeniedError) reason() string {
	if e.why != "" {
		return e.why
	}
	return "is refused."
}

func (w *Workspace) refuse(abs, msg string) error {
	w.log.Debug("workspace refused path", "path", abs, "reason", msg)
	return &DeniedError{Path: abs, Msg: msg}
}

func (w *Workspace) refuseWhy(abs, why string) error {
	err := w.refuse(abs, fmt.Sprintf("Access to %s was denied: it %s", abs, why))
	err.(*DeniedError).why = why
	return err
}
