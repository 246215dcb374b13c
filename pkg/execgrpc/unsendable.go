package execgrpc

import (
	"google.golang.org/protobuf/proto"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Unsendable returns the Result a client gives a tool_use it cannot send,
// or nil when it can be sent. A message the transport cannot carry breaks
// the whole Execute stream (gRPC ends a stream on any failed send, and an
// executor ends it on a message past its limit), so a client checks each
// ToolUse first and answers the ones that fail itself, as the executor
// would have: an is_error result with OUTCOME_INVALID_INPUT. A message
// cannot be carried when a string in it is not UTF-8 (proto3 strings must
// be; the input is the one a model or a user writes, ids and names come
// from decoded JSON, which is UTF-8) or when it is larger than
// rpcserver.MaxMessageBytes, the limit of toolsvc and of our clients.
func Unsendable(use *executorv1.ToolUse) *executorv1.Result {
	err := unsendable(use)
	if err == nil {
		return nil
	}
	return &executorv1.Result{
		ToolUseId: use.GetId(),
		ToolName:  use.GetName(),
		Content:   []*executorv1.ContentBlock{{Block: &executorv1.ContentBlock_Text{Text: &executorv1.TextBlock{Text: tool.WrapUseError(err.Error())}}}},
		IsError:   proto.Bool(true),
		Outcome:   executorv1.Outcome_OUTCOME_INVALID_INPUT,
	}
}

// unsendable says why use cannot be sent, or nil.
func unsendable(use *executorv1.ToolUse) error {
	size := proto.Size(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: use}})
	if err := schema.Unsendable(use.GetName(), use.GetInputJson(), size, rpcserver.MaxMessageBytes); err != nil {
		return err
	}
	return nil
}
