package shell

import "strings"

// mayChangeDir reports whether command could leave the shell in another
// working directory. Finding out where it ended costs every call a start-up
// file and a file written at exit (see bashEnvScript), so commands that
// cannot move skip it.
//
// Only the builtins cd, pushd and popd change bash's own directory. A
// command can reach them without naming them only through expansion or
// quote removal ($, `, quotes, backslash, globs, braces) or through code
// read from elsewhere (source, ".", eval). A command with none of those
// characters or words, and without the names themselves, cannot move; the
// check errs on the side of saying it can. It relies on the runner's
// environment holding no BASH_ENV and no exported functions, which its
// allowlist of variables ensures.
func mayChangeDir(command string) bool {
	for i := 0; i < len(command); i++ {
		switch c := command[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(" \t\n-_/=:,+@%^;&|<>()!#~", c) >= 0:
		case c == '.':
			if sourceDot(command, i) {
				return true
			}
		default:
			return true
		}
	}
	for _, word := range []string{"cd", "pushd", "popd", "source", "eval"} {
		if strings.Contains(command, word) {
			return true
		}
	}
	return false
}

// sourceDot reports whether the "." at command[i] can be the source
// builtin: a word of its own.
func sourceDot(command string, i int) bool {
	const before, after = " \t\n;&|(!", " \t\n;&|)"
	return (i == 0 || strings.IndexByte(before, command[i-1]) >= 0) &&
		(i == len(command)-1 || strings.IndexByte(after, command[i+1]) >= 0)
}
