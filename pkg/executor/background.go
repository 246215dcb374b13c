package executor

import "time"

// backgroundable returns the channel that moves c to the background, for
// a Bash call about to run; nil for other tools.
func (s *Session) backgroundable(c *call) <-chan struct{} {
	if c.tool == nil || c.tool.spec.Name != "Bash" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.background = make(chan struct{})
	return c.background
}

// Background asks a running foreground Bash call to go on in the
// background (see tool.Call.Background). A BackgroundAck answers it, before
// the call's Result.
func (s *Session) Background(b Background) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.live[b.ToolUseID]
	_, finished := s.done[b.ToolUseID]
	reason := ""
	switch {
	case finished:
		reason = "the call has finished"
	case c == nil:
		reason = "no call with that tool_use id in this session"
	case c.tool == nil || c.tool.spec.Name != "Bash":
		reason = "only a Bash call can move to the background"
	case c.background == nil:
		reason = "the call has not started to run yet"
	case c.backgrounded:
		reason = "the call was asked to move already"
	default:
		c.backgrounded = true
		close(c.background)
	}
	s.out.push(&Event{Time: time.Now(), BackgroundAck: &BackgroundAck{ToolUseID: b.ToolUseID, Moved: reason == "", Reason: reason}})
}
