// Package permission decides whether a tool call may run, from permission
// rules in Claude Code's settings syntax and a permission mode.
//
// A rule names a tool, optionally with a specifier:
//
//	Bash                          every Bash command
//	Bash(git status)              exactly that command
//	Bash(npm run test:*)          npm run test, with or without more words
//	Bash(git * main)              "*" stands for any text, spaces included
//	Read(./src/**)                files under src/ of the workspace
//	Edit(/docs/**)                the same, written from the workspace root
//	Read(//etc/hosts)             an absolute path
//	Read(~/.ssh/**)               a path under the home directory
//	Read(*.env)                   a name at any depth of the workspace
//	WebFetch(domain:example.com)  fetches from that host
//	mcp__github                   every tool of an MCP server
//
// Path specifiers are gitignore-style globs ("*" within a name, "**" across
// directories; a pattern without a slash matches at any depth; a match on
// a directory covers everything below it). Relative patterns ("src/**",
// "./src/**", "/src/**") are anchored at the session's workspace, not at
// the shell's current directory, which moves. Edit rules cover every tool
// that changes files (Edit, Write, NotebookEdit, MultiEdit); Read rules
// every tool that reads them (Read, Glob, Grep).
//
// A Policy is compiled once from the operator's rules and the session's.
// Decide checks deny rules, then — in plan mode — refuses anything that is
// not read-only, then ask rules, then allow rules, then the mode's default:
// default allows read-only tools and asks for the rest, acceptEdits also
// allows file edits inside the workspace, plan denies what is not
// read-only, bypassPermissions allows everything no rule denies or asks
// about. Since deny and ask come before allow, the session's rules cannot
// loosen the operator's; an operator can also forbid bypassPermissions.
//
// Bash commands are matched one simple command at a time, after parsing
// with pkg/bashcmd: a deny or ask rule applies if any command of the line
// matches it (looking through quoting, bash -c, env, xargs, sudo, find
// -exec and the like), an allow rule only if every command matches an allow
// rule. What cannot be read from the text — a command name built at run
// time, eval of a variable, a script piped into a shell — is never allowed
// by a Bash rule and, where a deny rule could apply to it, is asked about.
//
// The package is pure: Decide does no I/O and is safe for concurrent use.
//
// Why one package of this size (about 1,200 lines): rule parsing, the
// path and command matchers and the decision order are one specification
// (Claude Code's rule syntax) and are tested as one against it.
package permission
