package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/settings"
)

// valuesFlag is a repeatable flag whose values are kept whole (JSON holds
// commas and spaces).
type valuesFlag []string

func (v *valuesFlag) String() string { return strings.Join(*v, " ") }

func (v *valuesFlag) Set(s string) error {
	*v = append(*v, s)
	return nil
}

// projectMCPFile is the project's MCP configuration, as Claude Code names it.
const projectMCPFile = ".mcp.json"

// mcpFlags are the MCP and handshake flags of -p and serve.
type mcpFlags struct {
	configs        valuesFlag
	strict         bool
	requireSandbox string
	required       handshake.Requirements // parsed by checkRequire
}

func (m *mcpFlags) register(fs *flag.FlagSet, strictHelp string) {
	fs.Var(&m.configs, "mcp-config", `MCP servers, as JSON or a file in Claude Code's shape ({"mcpServers": {...}}); ${VAR} is expanded from this process's environment (repeatable; a later server replaces an earlier one of the same name)`)
	fs.BoolVar(&m.strict, "strict-mcp-config", false, strictHelp)
	fs.StringVar(&m.requireSandbox, "require-sandbox", "", "protections the executor must enforce, e.g. \"landlock,network:none\"; an executor whose Hello lacks one is refused, naming what is missing (words: "+strings.Join(handshake.Vocabulary(), ", ")+")")
}

// checkRequire parses --require-sandbox.
func (m *mcpFlags) checkRequire() error {
	r, err := handshake.Parse(m.requireSandbox)
	if err != nil {
		return usagef("--require-sandbox: %w", err)
	}
	m.required = r
	return nil
}

// load reads the --mcp-config values into one set of servers, later ones
// replacing earlier ones of the same name, ${VAR} expanded with getenv. A
// value that is not JSON of that shape, or a file that cannot be read, is
// a usage error; a server whose entry is unusable is kept, for the
// executor to report as failed.
func (m *mcpFlags) load(getenv func(string) string) (mcpclient.Servers, error) {
	var sets []mcpclient.Servers
	for _, a := range m.configs {
		s, err := mcpclient.Load(a)
		if err != nil {
			return nil, usagef("--mcp-config: %w", err)
		}
		sets = append(sets, s)
	}
	servers, err := mcpclient.Merge(sets...).Expand(lookupEnv(getenv))
	if err != nil {
		return nil, usagef("--mcp-config: %w", err)
	}
	return servers, nil
}

// lookupEnv turns getenv into a lookup: an empty variable counts as unset.
func lookupEnv(getenv func(string) string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}
}

// mcpApproval is what the settings say of the project's .mcp.json servers
// (Claude Code's keys): all approved, or some by name, or some refused.
type mcpApproval struct {
	all      bool
	enabled  []string
	disabled []string
}

// readMCPApproval layers the approval keys of sources, lowest precedence
// first: the boolean of a later source replaces an earlier one, the lists
// add up. Sources are valid settings already.
func readMCPApproval(sources []settings.Source) mcpApproval {
	var a mcpApproval
	for _, src := range sources {
		var v struct {
			All      *bool    `json:"enableAllProjectMcpServers"`
			Enabled  []string `json:"enabledMcpjsonServers"`
			Disabled []string `json:"disabledMcpjsonServers"`
		}
		if json.Unmarshal(src.Data, &v) != nil {
			continue
		}
		if v.All != nil {
			a.all = *v.All
		}
		a.enabled = appendNew(a.enabled, v.Enabled)
		a.disabled = appendNew(a.disabled, v.Disabled)
	}
	return a
}

// skippedServer is a project server that is not used, and why.
type skippedServer struct {
	name, status, reason string
}

// projectMCP reads dir/.mcp.json and returns the servers the settings
// approve, ${VAR} expanded with getenv, and those left out: refused by
// disabledMcpjsonServers, not approved (headless, nobody can be asked, as
// claude -p does not ask), or naming a variable that is not set. No file
// gives nothing; a file that is not an MCP configuration is an error.
func projectMCP(dir string, a mcpApproval, getenv func(string) string) (mcpclient.Servers, []skippedServer, error) {
	path := filepath.Join(dir, projectMCPFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	servers, err := mcpclient.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	use := mcpclient.Servers{}
	var skipped []skippedServer
	for _, name := range servers.Names() {
		switch {
		case slices.Contains(a.disabled, name):
			skipped = append(skipped, skippedServer{name, "disabled", "refused by disabledMcpjsonServers in the settings"})
			continue
		case !a.all && !slices.Contains(a.enabled, name):
			skipped = append(skipped, skippedServer{name, "disabled",
				"a project server of .mcp.json that is not approved: approve it with enabledMcpjsonServers (or enableAllProjectMcpServers) in the settings"})
			continue
		}
		c, err := servers[name].Expand(lookupEnv(getenv))
		if err != nil {
			skipped = append(skipped, skippedServer{name, "failed", err.Error()})
			continue
		}
		use[name] = c
	}
	return use, skipped, nil
}

// mcpSettings reads the approval of the project's MCP servers from the
// settings files a run layers (see runSettings) and --settings.
func mcpSettings(userDir, projectDir, settingsFlag string) (mcpApproval, error) {
	sources, err := settings.Discover(userDir, projectDir)
	if err != nil {
		return mcpApproval{}, err
	}
	if settingsFlag != "" {
		src, err := settingsSource(settingsFlag)
		if err != nil {
			return mcpApproval{}, err
		}
		sources = append(sources, src)
	}
	return readMCPApproval(sources), nil
}
