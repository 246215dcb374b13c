package sandbox

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("sandbox: runner closed")

// PolicyError is a start the sandbox refused because of its policy. Msg
// names what was refused and why, in words fit for the model.
type PolicyError struct {
	Msg string
}

// Error returns the message.
func (e *PolicyError) Error() string { return e.Msg }

func denied(format string, args ...any) error {
	return &PolicyError{Msg: fmt.Sprintf(format, args...)}
}
