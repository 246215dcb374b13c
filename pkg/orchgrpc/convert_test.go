package orchgrpc

import (
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/tool"
)

// A change of the MCP tools reaches Converse clients; a session's sandbox
// and MCP servers are in its Session; a configuration's MCP servers and
// requirements reach the orchestrator.
func TestMCPAndSandboxConversions(t *testing.T) {
	ev := eventToProto(orchestrator.Event{Seq: 7, Kind: orchestrator.EventMCPToolsChanged, MCPToolsChanged: &execapi.MCPToolsChanged{
		Servers: []mcpclient.ServerStatus{{Name: "ex", Transport: "stdio", State: mcpclient.StateConnected, Tools: 1}},
		Tools:   []tool.Spec{{Name: "mcp__ex__late", Description: "late", InputSchema: []byte(`{"type":"object"}`)}},
	}})
	c := ev.GetMcpToolsChanged()
	if ev.GetSequence() != 7 || len(c.GetServers()) != 1 || c.GetServers()[0].GetState() != executorv1.McpServerState_MCP_SERVER_STATE_CONNECTED ||
		len(c.GetTools()) != 1 || c.GetTools()[0].GetName() != "mcp__ex__late" {
		t.Errorf("mcp_tools_changed = %v", ev)
	}

	s := sessionToProto(orchestrator.Info{ID: "s",
		Sandbox:    &execapi.SandboxInfo{Backend: "landlock", Enforced: []string{"landlock_fs", "network_isolation"}, Network: "none", RunAs: "nobody"},
		MCPServers: []mcpclient.ServerStatus{{Name: "bad", State: mcpclient.StateFailed, Error: "not found"}},
	})
	sb := s.GetSandbox()
	if sb.GetBackend() != "landlock" || sb.GetNetwork() != "none" || sb.GetRunAsUser() != "nobody" || len(sb.GetEnforced()) != 2 ||
		sb.GetEnforced()[0] != executorv1.Protection_PROTECTION_LANDLOCK_FS {
		t.Errorf("sandbox = %v", sb)
	}
	if m := s.GetMcpServers(); len(m) != 1 || m[0].GetState() != executorv1.McpServerState_MCP_SERVER_STATE_FAILED || m[0].GetError() != "not found" {
		t.Errorf("mcp_servers = %v", m)
	}
	if s := sessionToProto(orchestrator.Info{ID: "s"}); s.GetSandbox() != nil {
		t.Errorf("a session not connected has a sandbox: %v", s.GetSandbox())
	}
	cfg, err := configFromProto(&orchestratorv1.SessionConfig{
		McpServers:     map[string]*executorv1.McpServerConfig{"docs": {Type: "http", Url: "http://127.0.0.1:1/mcp", Headers: map[string]string{"A": "${B}"}}},
		RequireSandbox: []string{"landlock"},
	})
	if err != nil || cfg.MCPServers["docs"].URL != "http://127.0.0.1:1/mcp" || cfg.MCPServers["docs"].Headers["A"] != "${B}" ||
		len(cfg.RequireSandbox) != 1 || cfg.RequireSandbox[0] != "landlock" {
		t.Errorf("config = %+v, %v", cfg, err)
	}
}
