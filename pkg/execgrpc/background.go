package execgrpc

import (
	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
)

// BackgroundAckToProto converts a BackgroundAck; the orchestrator's edge
// relays it too.
func BackgroundAckToProto(a *execapi.BackgroundAck) *executorv1.BackgroundAck {
	return &executorv1.BackgroundAck{ToolUseId: a.ToolUseID, Moved: a.Moved, Reason: a.Reason}
}

// BackgroundAckFromProto converts a BackgroundAck the client received.
func BackgroundAckFromProto(m *executorv1.BackgroundAck) *execapi.BackgroundAck {
	return &execapi.BackgroundAck{ToolUseID: m.GetToolUseId(), Moved: m.GetMoved(), Reason: m.GetReason()}
}
