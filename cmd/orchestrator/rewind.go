package main

import (
	"context"
	"fmt"
	"io"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
)

// rewind goes back in sess to before the assistant message holding
// toolUseID (orchestrator.Session.Rewind) and says on w what it did.
func rewind(ctx context.Context, sess *orchestrator.Session, toolUseID string, w io.Writer) error {
	res, err := sess.Rewind(ctx, toolUseID)
	if res != nil && res.Restore != nil {
		for _, f := range res.Restore.Files {
			switch f.Action {
			case execapi.RestoreRestored:
				fmt.Fprintf(w, "orchestrator: restored %s\n", f.Path)
			case execapi.RestoreRemoved:
				fmt.Fprintf(w, "orchestrator: removed %s (created since)\n", f.Path)
			default:
				fmt.Fprintf(w, "orchestrator: not restored %s: %s\n", f.Path, f.Error)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("--rewind-to %s: %w", toolUseID, err)
	}
	messages := "messages"
	if res.MessagesRemoved == 1 {
		messages = "message"
	}
	fmt.Fprintf(w, "orchestrator: conversation %s rewound to before %s: %d %s removed\n", sess.ID(), toolUseID, res.MessagesRemoved, messages)
	return nil
}
