package execapi

// Background asks to move a running foreground Bash call to the
// background: the command goes on as a background task, and the call's
// Result names it.
type Background struct {
	// ToolUseID is the running call.
	ToolUseID string
}

// BackgroundAck answers a Background.
type BackgroundAck struct {
	// ToolUseID is the call the Background named.
	ToolUseID string
	// Moved is true when the running call was told to move; its Result
	// says whether it did (a command that ends at that moment has its
	// ordinary Result).
	Moved bool
	// Reason says why the call was not moved.
	Reason string
}
