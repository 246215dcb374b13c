// Package file implements the Read, Write, Edit and NotebookEdit tools.
//
// All file access goes through the session's workspace (tool.Env.Files),
// so paths outside the allowed directories, protected files and symbolic
// link tricks are refused there, not here. What this package adds is the
// tools' contract with the model, kept identical to Claude Code's: line
// numbered output, paging and size caps for Read; images, Jupyter
// notebooks (cells with their outputs, via pkg/notebook) and PDFs (as
// document blocks, page ranges cut with pkg/pdfdoc); and the
// read-before-write and modified-since-read rules for Write, Edit and
// NotebookEdit, backed by the session's record of reads (tool.Env.Reads).
//
// It does not run processes and does not decide permissions; the executor
// does that before a call gets here.
//
// Why one package of this size (about 1,300 lines): the four tools share
// the read-before-write record and the output conventions, and each
// tool is a file of its own.
package file
