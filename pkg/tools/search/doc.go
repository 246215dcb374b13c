// Package search implements the Glob and Grep tools.
//
// Glob walks the session's workspace itself (tool.Env.Files), so it sees
// only what the workspace allows. Grep runs the ripgrep binary, which is
// what gives it ripgrep's regex syntax, file types, ignore rules and speed;
// the workspace resolves and checks the path first, ripgrep is never told
// to follow symbolic links, the deny patterns are passed to it as excluding
// globs, and its output is filtered through them once more.
//
// Results use Claude Code's formats: paths relative to the working
// directory, "Found N files", "No files found", and so on.
//
// Why one package of this size (about 900 lines): Glob and Grep share the
// path display, the deny filtering and the result formats.
package search
