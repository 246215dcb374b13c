package bashcmd

import (
	"strings"
)

// ReadOnly reports whether line only reads: it parses, its structure
// writes nothing (no output redirection other than to /dev/null or a file
// descriptor, no variable or function definitions, no background jobs),
// and every simple command in it is a known read-only program with
// read-only arguments, looked through wrappers such as timeout, xargs or
// bash -c. Anything unknown or dynamic in command position gives false.
func ReadOnly(line string) bool {
	s, err := Parse(line)
	return err == nil && s.ReadOnly()
}

// ReadOnly reports whether the script only reads; see the function
// ReadOnly.
func (s *Script) ReadOnly() bool {
	if len(s.Effects) > 0 {
		return false
	}
	for _, c := range s.Commands {
		if !c.readOnly() {
			return false
		}
	}
	return true
}

// readOnlyWrappers may appear around a read-only command without making it
// write.
var readOnlyWrappers = map[string]bool{
	"timeout": true, "nice": true, "nohup": true, "command": true, "builtin": true,
	"stdbuf": true, "time": true, "xargs": true, "exec": true,
	"bash": true, "sh": true, "dash": true, "zsh": true, "eval": true,
}

func (c Command) readOnly() bool {
	if c.Opaque || c.Privileged || len(c.Words) == 0 || c.Words[0].Dynamic {
		return false
	}
	for _, w := range c.Wrappers {
		if !readOnlyWrappers[w] {
			return false
		}
	}
	for _, as := range c.Assigns {
		name, _, _ := strings.Cut(as.Text, "=")
		if as.Dynamic || !safeEnv(name) {
			return false
		}
	}
	name := c.Words[0].Text
	if strings.Contains(name, "/") {
		return false // a path can name anything
	}
	check, ok := readOnlyPrograms[name]
	if !ok {
		return false
	}
	return check(c.Words[1:])
}

// argCheck decides whether a program's arguments keep it read-only.
type argCheck func(args []Word) bool

func anyArgs([]Word) bool { return true }

// noArgs allows only options, never operands.
func noOperands(args []Word) bool {
	for _, a := range args {
		if a.Dynamic || !strings.HasPrefix(a.Text, "-") {
			return false
		}
	}
	return true
}

// banning returns a check that refuses dynamic arguments and the given
// options: short lists option letters refused anywhere in a cluster, long
// the long options refused, also when abbreviated (GNU and git accept
// unambiguous prefixes).
func banning(short string, long ...string) argCheck {
	return func(args []Word) bool {
		return allLiteral(args) && !hasOption(args, short, long...)
	}
}

func allLiteral(args []Word) bool {
	for _, a := range args {
		if a.Dynamic {
			return false
		}
	}
	return true
}

// hasOption reports whether args, up to "--", use one of the options.
func hasOption(args []Word, short string, long ...string) bool {
	for _, a := range args {
		t := a.Text
		if t == "--" {
			return false
		}
		if name, ok := strings.CutPrefix(t, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			for _, l := range long {
				if name != "" && strings.HasPrefix(l, name) {
					return true
				}
			}
			continue
		}
		if len(t) > 1 && t[0] == '-' && short != "" && strings.ContainsAny(t[1:], short) {
			return true
		}
		// find-style single-dash long options.
		for _, l := range long {
			if strings.HasPrefix(l, "-") && t == l {
				return true
			}
		}
	}
	return false
}

// atMostOperands allows n operands at most: with two, uniq or xxd write
// the second.
func atMostOperands(n int, also argCheck) argCheck {
	return func(args []Word) bool {
		if !allLiteral(args) || (also != nil && !also(args)) {
			return false
		}
		count := 0
		for _, a := range args {
			if !strings.HasPrefix(a.Text, "-") || a.Text == "-" {
				count++
			}
		}
		return count <= n
	}
}

// readOnlyPrograms lists the programs that only read, and when.
var readOnlyPrograms map[string]argCheck

func init() {
	readOnlyPrograms = map[string]argCheck{
		"sort":     banning("o", "output", "compress-program", "random-source"),
		"uniq":     atMostOperands(1, nil),
		"xxd":      atMostOperands(1, banning("r")),
		"file":     banning("C", "compile"),
		"tree":     banning("o", "output"),
		"printf":   banning("v"),
		"date":     banning("s", "set"),
		"hostname": noOperands,
		"find":     banning("", "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
		"rg":       banning("", "pre", "pre-glob"),
		"ag":       banning("", "pager"),
		"env":      noOperands,
		"command":  func(args []Word) bool { return len(args) > 0 && hasShortFlag(args, "vV") },
		"sed":      sedReadOnly,
		"git":      gitReadOnly,
	}
	for _, name := range []string{
		"cat", "head", "tail", "wc", "stat", "strings", "du", "df", "grep", "egrep", "fgrep",
		"ls", "dir", "vdir", "which", "whereis", "type", "echo", "true", "false", ":", "pwd",
		"sleep", "basename", "dirname", "realpath", "readlink", "cut", "tr", "diff", "cmp",
		"comm", "nl", "od", "hexdump", "md5sum", "sha1sum", "sha224sum", "sha256sum",
		"sha384sum", "sha512sum", "b2sum", "cksum", "sum", "base64", "base32", "seq", "id",
		"whoami", "uname", "nproc", "arch", "printenv", "free", "uptime", "ps", "pgrep",
		"column", "fold", "fmt", "rev", "tac", "paste", "join", "expand", "unexpand", "test",
		"[", "locale", "getconf", "tty", "groups", "jq", "numfmt", "pr", "look", "lsof",
		"getent", "lscpu", "lsblk", "tsort", "factor", "yes", "users", "who", "w", "zcat",
	} {
		readOnlyPrograms[name] = anyArgs
	}
}

// gitReadOnly accepts the git subcommands that only read the repository.
func gitReadOnly(args []Word) bool {
	if !allLiteral(args) {
		return false
	}
	i := 0
global:
	for i < len(args) {
		t := args[i].Text
		switch {
		case t == "-C" || t == "--git-dir" || t == "--work-tree":
			i += 2
		case t == "--no-pager" || t == "-P" || t == "--no-optional-locks" || t == "--literal-pathspecs" ||
			t == "--no-replace-objects" || t == "--bare" || t == "--glob-pathspecs" || t == "--noglob-pathspecs" ||
			strings.HasPrefix(t, "--git-dir=") || strings.HasPrefix(t, "--work-tree="):
			i++
		case strings.HasPrefix(t, "-"):
			return false // -c, --exec-path, --config-env, -p (a pager), …
		default:
			break global
		}
	}
	if i >= len(args) {
		return false
	}
	sub, rest := args[i].Text, args[i+1:]
	// --output writes a file; -O / --open-files-in-pager runs a program.
	if hasOption(rest, "", "output", "open-files-in-pager", "ext-diff") {
		return false
	}
	first := ""
	if len(rest) > 0 {
		first = rest[0].Text
	}
	switch sub {
	case "status", "log", "diff", "show", "blame", "annotate", "shortlog", "describe", "rev-parse",
		"rev-list", "ls-files", "ls-tree", "cat-file", "merge-base", "name-rev", "for-each-ref",
		"show-ref", "show-branch", "count-objects", "whatchanged", "diff-tree", "diff-files",
		"diff-index", "check-ignore", "check-attr", "cherry", "var", "version":
		return true
	case "grep":
		return !hasOption(rest, "O", "open-files-in-pager")
	case "reflog":
		return first == "" || first == "show" || strings.HasPrefix(first, "-")
	case "stash":
		return first == "list" || first == "show"
	case "worktree":
		return first == "list"
	case "submodule":
		return first == "status"
	case "remote":
		return first == "" || first == "-v" || first == "--verbose" || first == "show" || first == "get-url"
	case "branch":
		return listingOnly(rest, []string{"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose",
			"--show-current", "--no-color", "--color", "--column", "--no-column", "-i", "--ignore-case",
			"--no-abbrev", "--omit-empty", "-q", "--quiet"},
			[]string{"--merged", "--no-merged", "--contains", "--no-contains", "--points-at", "--sort", "--format", "--abbrev"})
	case "tag":
		return listingOnly(rest, []string{"-n", "--column", "--no-column", "-i", "--ignore-case", "--color", "--omit-empty"},
			[]string{"--merged", "--no-merged", "--contains", "--no-contains", "--points-at", "--sort", "--format"})
	case "config":
		if first == "get" || first == "list" {
			return true
		}
		for _, a := range rest {
			switch a.Text {
			case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color", "--get-colorbool":
				return !hasOption(rest, "e", "edit", "add", "unset", "unset-all", "replace-all", "rename-section", "remove-section")
			}
		}
		return false
	}
	return false
}

// listingOnly accepts git branch / tag invocations that list: known flags,
// options with a value, and name patterns only after --list / -l.
func listingOnly(rest []Word, flags, withValue []string) bool {
	list := false
	for _, a := range rest {
		if a.Text == "-l" || a.Text == "--list" {
			list = true
		}
	}
	for i := 0; i < len(rest); i++ {
		t := rest[i].Text
		name, _, hasValue := strings.Cut(t, "=")
		switch {
		case t == "-l" || t == "--list" || contains(flags, t) || strings.HasPrefix(t, "-n") && contains(flags, "-n"):
		case contains(withValue, name):
			if !hasValue && i+1 < len(rest) && !strings.HasPrefix(rest[i+1].Text, "-") {
				i++ // the commit or value
			}
		case strings.HasPrefix(t, "--color=") && contains(flags, "--color"):
		case !strings.HasPrefix(t, "-") && list:
		default:
			return false
		}
	}
	return true
}

// quietPrograms are programs, beyond the read-only ones, known not to run
// any of their arguments as a command.
var quietPrograms = map[string]bool{
	"cp": true, "mv": true, "rm": true, "rmdir": true, "mkdir": true, "touch": true, "ln": true,
	"chmod": true, "chown": true, "chgrp": true, "tee": true, "install": true, "truncate": true,
	"dd": true, "cd": true, "pushd": true, "popd": true, "export": true, "unset": true, "read": true,
	"curl": true, "wget": true, "gzip": true, "gunzip": true, "zip": true, "unzip": true,
}

// RunsArguments reports whether the command's program may run one of its
// arguments as another command. It is false only for programs known not
// to (cat, grep, rm, cp, …, and git without options that run programs);
// a permission check uses it to look for denied commands hidden in the
// arguments of unknown wrappers such as strace or parallel.
func (c Command) RunsArguments() bool {
	if len(c.Words) == 0 || c.Words[0].Dynamic {
		return true
	}
	name := baseName(c.Words[0].Text)
	args := c.Words[1:]
	switch name {
	case "git":
		if hasOption(args, "cx", "exec", "config-env", "upload-pack", "receive-pack", "exec-path") {
			return true
		}
		for _, a := range args {
			switch a.Text {
			case "rebase", "bisect", "submodule", "filter-branch", "filter-repo", "difftool", "mergetool", "-c":
				return true
			}
		}
		return false
	case "find", "sed", "awk", "sort", "rg", "ag":
		// These can run programs only through options the read-only check
		// refuses; the read-only ones are quiet.
		return !(Command{Words: c.Words}).readOnly()
	case "command":
		return !hasShortFlag(args, "vV") // command -v only looks a name up
	case "env":
		return len(args) > 0 // left over only when it runs nothing we could see
	}
	if quietPrograms[name] {
		return false
	}
	if check, ok := readOnlyPrograms[name]; ok {
		return !check(args)
	}
	return true
}
