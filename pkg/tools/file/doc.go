// Package file implements the Read, Write and Edit tools.
//
// All file access goes through the session's workspace (tool.Env.Files),
// so paths outside the allowed directories, protected files and symbolic
// link tricks are refused there, not here. What this package adds is the
// tools' contract with the model, kept identical to Claude Code's: line
// numbered output, paging and size caps for Read, and the read-before-write
// and modified-since-read rules for Write and Edit, backed by the session's
// record of reads (tool.Env.Reads).
//
// It does not run processes and does not decide permissions; the executor
// does that before a call gets here.
package file
