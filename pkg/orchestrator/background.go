package orchestrator

import (
	"fmt"

	"github.com/toolwire/toolwire/pkg/execapi"
)

// Background asks the executor to move a running foreground Bash call of
// the turn to the background: the command goes on as a background task,
// the call's result (the launch text with the task id) lets the turn go
// on, and the task's notification reaches the model when it ends. An
// EventBackgroundAck answers.
func (s *Session) Background(toolUseID string) error {
	if toolUseID == "" {
		return fmt.Errorf("%w: background without a tool_use id", ErrInvalid)
	}
	s.linkMu.Lock()
	l := s.link
	s.linkMu.Unlock()
	if l == nil {
		return fmt.Errorf("session %s: %w", s.id, ErrExecutorUnavailable)
	}
	if err := l.Background(execapi.Background{ToolUseID: toolUseID}); err != nil {
		return fmt.Errorf("session %s: %w: %w", s.id, ErrExecutorUnavailable, err)
	}
	return nil
}
