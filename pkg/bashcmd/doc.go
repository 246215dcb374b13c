// Package bashcmd reads Bash command lines the way a permission check or a
// scheduler needs: which simple commands a line runs, with which words, and
// whether it only reads.
//
// Commands parses a line with a real shell parser (mvdan.cc/sh/v3) and
// lists every simple command in it — across &&, ||, ;, pipes, subshells,
// command and process substitutions, here-documents and function bodies —
// with quoting resolved, so that each of these reads as rm:
//
//	r''m   "rm"   \rm   $'\x72m'
//
// Wrappers that run another command are looked through: timeout, nice,
// nohup, stdbuf, command, builtin, exec, env, sudo, xargs, find -exec, and
// shells given a script (bash -c '…', sh <<EOF …, eval '…') whose script is
// parsed in turn. Whatever cannot be known from the text is marked: a word
// built by expansion or substitution is Dynamic, and a command whose real
// program cannot be read (eval of a variable, a shell reading a pipe) is
// Opaque, so that a rule cannot be dodged by hiding the command.
//
// Parse also reports the line's other Effects: output redirected to files,
// variables set, functions defined (which may shadow a program), background
// jobs. A permission check must not let a rule for "git status" allow
// "git() { …; }; git status".
//
// ReadOnly decides whether a line only reads: every command must be a known
// read-only program with read-only arguments, with no output redirection
// other than to /dev/null, no assignments that change behaviour and
// nothing dynamic in command position. When in doubt it says no.
//
// The package runs nothing and touches no files.
//
// Why one package of this size (about 1,900 lines): the read-only rules of
// every known program and the walk over the shell syntax tree answer one
// question together, and each wrapper it looks through needs both.
package bashcmd
