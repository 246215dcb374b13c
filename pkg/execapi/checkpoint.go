package execapi

import (
	"io/fs"
	"time"
)

// ListCheckpoints asks for a session's file checkpoints.
type ListCheckpoints struct {
	// RequestID comes back in the answer.
	RequestID string
}

// RestoreCheckpoint asks to put the files the session's file tools
// changed, from ToolUseID on, back to their state before it.
type RestoreCheckpoint struct {
	// RequestID comes back in the answer.
	RequestID string
	// ToolUseID is the first call to undo.
	ToolUseID string
}

// CheckpointList answers a ListCheckpoints.
type CheckpointList struct {
	RequestID string
	// Checkpoints are oldest first.
	Checkpoints []Checkpoint
	// Dropped are the calls whose checkpoints were dropped for the size
	// bound, oldest first.
	Dropped []string
	// Bytes is the previous content held; MaxBytes its bound.
	Bytes, MaxBytes int64
}

// Checkpoint is what one call changed, as it was before.
type Checkpoint struct {
	ToolUseID string
	ToolName  string
	Time      time.Time
	Files     []CheckpointFile
}

// CheckpointFile is one file's state before a call.
type CheckpointFile struct {
	Path    string
	Existed bool
	Mode    fs.FileMode
	Size    int64
}

// RestoreAction is what a restore did to a file.
type RestoreAction int

const (
	// RestoreRestored: the previous bytes and mode were written back.
	RestoreRestored RestoreAction = iota + 1
	// RestoreRemoved: the file did not exist before and was removed.
	RestoreRemoved
	// RestoreFailed: refused or failed; see Error.
	RestoreFailed
)

// RestoredFile is what a restore did to one file.
type RestoredFile struct {
	Path   string
	Action RestoreAction
	Error  string
}

// RestoreResult answers a RestoreCheckpoint.
type RestoreResult struct {
	RequestID string
	ToolUseID string
	// Files are in path order.
	Files []RestoredFile
	// Error says why nothing was restored.
	Error string
}
