package executor

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/tool"
)

// A session's MCP tools live beside the executor's built-in tools: the
// tools of the operator's servers and of the session's own, started when
// the session opens (Open waits for them, at most the start timeout, so
// that Hello lists them) and stopped when it closes. The pool can change
// while the session lives; each change is an MCPToolsChanged event.

// mcpToolPrefix starts the name of every MCP tool.
const mcpToolPrefix = "mcp__"

// startMCP starts the operator's and the session's MCP servers.
func (s *Session) startMCP(ctx context.Context, servers mcpclient.Servers) {
	cfg := s.ex.cfg.MCP
	if len(cfg.Servers) == 0 && len(servers) == 0 {
		return
	}
	// A change reported while the set starts waits until it is in place.
	s.mcpChangeMu.Lock()
	defer s.mcpChangeMu.Unlock()
	s.mcp = mcpclient.Start(ctx, mcpclient.Options{
		Operator:        cfg.Servers,
		Session:         servers,
		Procs:           s.env.Procs,
		Network:         s.sandbox.Network,
		StartTimeout:    cfg.StartTimeout,
		MaxOutputTokens: cfg.MaxOutputTokens,
		ClientVersion:   s.ex.cfg.Version,
		Logger:          s.log,
		OnChange:        s.mcpChanged,
	})
	s.env.OnClose(s.mcp.Close)
	s.registerMCP()
	for _, st := range s.mcp.Status() {
		s.log.Info("mcp server", "server", st.Name, "state", st.State.String(), "tools", st.Tools, "error", st.Error, "operator", st.Operator)
	}
}

// registerMCP compiles the current MCP tools into the session's registry.
func (s *Session) registerMCP() {
	tools := s.mcp.Tools()
	reg := make(map[string]*registered, len(tools))
	for _, t := range tools {
		r := register(t)
		reg[r.spec.Name] = r
	}
	s.toolsMu.Lock()
	s.mcpTools = reg
	s.toolsMu.Unlock()
}

// mcpChanged takes in a change of the MCP tools and tells the client.
func (s *Session) mcpChanged() {
	// One change at a time: the last event holds the latest list.
	s.mcpChangeMu.Lock()
	defer s.mcpChangeMu.Unlock()
	s.registerMCP()
	s.out.push(&Event{Time: time.Now(), MCPToolsChanged: &MCPToolsChanged{Servers: s.mcp.Status(), Tools: s.mcpSpecs()}})
}

// mcpSpecs returns the specs of the session's MCP tools, sorted by name.
func (s *Session) mcpSpecs() []tool.Spec {
	s.toolsMu.RLock()
	specs := make([]tool.Spec, 0, len(s.mcpTools))
	for _, r := range s.mcpTools {
		specs = append(specs, r.spec)
	}
	s.toolsMu.RUnlock()
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// lookup finds a tool of the session: a built-in one, or an MCP tool.
func (s *Session) lookup(name string) *registered {
	if r := s.ex.lookup(name); r != nil || !strings.HasPrefix(name, mcpToolPrefix) {
		return r
	}
	s.toolsMu.RLock()
	defer s.toolsMu.RUnlock()
	return s.mcpTools[name]
}
