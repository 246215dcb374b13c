// Package workspace gives the file tools of one session traversal-safe
// access to the directories the session may use.
//
// A Workspace holds one os.Root per allowed directory (the working
// directory, extra read-write roots and read-only roots). Every operation
// goes through those roots, so no "..", symbolic link (absolute or
// relative, swapped in at any moment) or /proc path can reach a file
// outside them. On top of that it refuses paths matching deny patterns
// (keys, credentials) and, by default, files with more than one hard link,
// since a hard link can name an inode that lives outside. Writes are
// atomic: a temporary file in the same directory, renamed over the target.
//
// A refused path yields a *DeniedError whose message says which path and
// why, in words meant for the model. The package confines file access made
// by this process only; confining child processes is pkg/sandbox's job.
// Like os.Root it does not stop bind mounts or mount points inside a root.
//
// Why one package of this size (about 1,100 lines): every file operation
// goes through the same roots and deny rules, so they live beside the
// checks they must not bypass.
package workspace
