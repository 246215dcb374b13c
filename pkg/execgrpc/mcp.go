package execgrpc

import (
	"encoding/json"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/tool"
)

// MCPServersToProto converts MCP server configurations for Open.mcp_servers.
// A client expands ${VAR} (mcpclient.Servers.Expand) before, from its own
// environment: the executor does not.
func MCPServersToProto(servers mcpclient.Servers) map[string]*executorv1.McpServerConfig {
	if len(servers) == 0 {
		return nil
	}
	out := make(map[string]*executorv1.McpServerConfig, len(servers))
	for name, c := range servers {
		out[name] = &executorv1.McpServerConfig{
			Type: c.Type, Command: c.Command, Args: c.Args, Env: c.Env, Url: c.URL, Headers: c.Headers,
		}
	}
	return out
}

// MCPServersFromProto converts Open.mcp_servers. Unusable entries are kept:
// the session reports them.
func MCPServersFromProto(m map[string]*executorv1.McpServerConfig) mcpclient.Servers {
	if len(m) == 0 {
		return nil
	}
	out := make(mcpclient.Servers, len(m))
	for name, c := range m {
		out[name] = mcpclient.ServerConfig{
			Type: c.GetType(), Command: c.GetCommand(), Args: c.GetArgs(), Env: c.GetEnv(), URL: c.GetUrl(), Headers: c.GetHeaders(),
		}
	}
	return out
}

var mcpStates = map[mcpclient.State]executorv1.McpServerState{
	mcpclient.StateConnected:    executorv1.McpServerState_MCP_SERVER_STATE_CONNECTED,
	mcpclient.StateFailed:       executorv1.McpServerState_MCP_SERVER_STATE_FAILED,
	mcpclient.StateDisconnected: executorv1.McpServerState_MCP_SERVER_STATE_DISCONNECTED,
}

func mcpStatusFromProto(ms []*executorv1.McpServerStatus) []mcpclient.ServerStatus {
	var out []mcpclient.ServerStatus
	for _, m := range ms {
		st := mcpclient.ServerStatus{Name: m.GetName(), Transport: m.GetTransport(), Operator: m.GetOperator(), Error: m.GetError(),
			ServerName: m.GetServerName(), ServerVersion: m.GetServerVersion(), Tools: int(m.GetTools())}
		for s, ps := range mcpStates {
			if ps == m.GetState() {
				st.State = s
			}
		}
		out = append(out, st)
	}
	return out
}

// MCPStatusToProto converts the state of a session's MCP servers, for
// clients of the orchestrator too.
func MCPStatusToProto(sts []mcpclient.ServerStatus) []*executorv1.McpServerStatus {
	out := make([]*executorv1.McpServerStatus, 0, len(sts))
	for _, st := range sts {
		out = append(out, &executorv1.McpServerStatus{
			Name: st.Name, Transport: st.Transport, Operator: st.Operator, State: mcpStates[st.State], Error: st.Error,
			ServerName: st.ServerName, ServerVersion: st.ServerVersion, Tools: uint32(st.Tools),
		})
	}
	return out
}

func toolSpecsToProto(specs []tool.Spec) []*executorv1.ToolDefinition {
	out := make([]*executorv1.ToolDefinition, 0, len(specs))
	for _, s := range specs {
		out = append(out, toolSpecToProto(s))
	}
	return out
}

// toolSpecToProto converts a tool spec to its ListTools form.
func toolSpecToProto(s tool.Spec) *executorv1.ToolDefinition {
	c := executorv1.Concurrency_CONCURRENCY_NEVER
	switch s.Concurrency {
	case tool.ConcurrencyAlways:
		c = executorv1.Concurrency_CONCURRENCY_ALWAYS
	case tool.ConcurrencyDependsOnInput:
		c = executorv1.Concurrency_CONCURRENCY_DEPENDS_ON_INPUT
	}
	return &executorv1.ToolDefinition{
		Name: s.Name, Description: s.Description, InputSchemaJson: string(s.InputSchema),
		ReadOnly: s.ReadOnly, Concurrency: c,
	}
}

func toolSpecsFromProto(defs []*executorv1.ToolDefinition) []tool.Spec {
	var out []tool.Spec
	for _, d := range defs {
		out = append(out, toolInfoFromProto(d).Spec)
	}
	return out
}

// toolInfoFromProto converts a ListTools entry. A schema that is not JSON
// is dropped rather than passed on to the model.
func toolInfoFromProto(d *executorv1.ToolDefinition) execapi.ToolInfo {
	spec := tool.Spec{Name: d.GetName(), Description: d.GetDescription(), ReadOnly: d.GetReadOnly()}
	if schema := json.RawMessage(d.GetInputSchemaJson()); json.Valid(schema) {
		spec.InputSchema = schema
	}
	switch d.GetConcurrency() {
	case executorv1.Concurrency_CONCURRENCY_ALWAYS:
		spec.Concurrency = tool.ConcurrencyAlways
	case executorv1.Concurrency_CONCURRENCY_DEPENDS_ON_INPUT:
		spec.Concurrency = tool.ConcurrencyDependsOnInput
	}
	return execapi.ToolInfo{Spec: spec, Aliases: d.GetAliases()}
}
