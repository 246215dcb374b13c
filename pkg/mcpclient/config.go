package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Transports a server can use.
const (
	// TransportStdio starts the server as a process inside the session's
	// sandbox and speaks to it over its stdin and stdout.
	TransportStdio = "stdio"
	// TransportHTTP reaches the server over streamable HTTP.
	TransportHTTP = "http"
	// TransportSSE reaches the server over the older HTTP+SSE transport.
	TransportSSE = "sse"
)

// ServerConfig is one entry of "mcpServers", in Claude Code's shape: a
// stdio server ({"command", "args", "env"}) or a remote one ({"type":
// "http" or "sse", "url", "headers"}).
type ServerConfig struct {
	// Type is TransportStdio, TransportHTTP or TransportSSE; empty means
	// stdio.
	Type string `json:"type,omitempty"`
	// Command is the program of a stdio server, looked up in the PATH of
	// the session's processes.
	Command string `json:"command,omitempty"`
	// Args are its arguments.
	Args []string `json:"args,omitempty"`
	// Env holds variables set for it on top of the sandbox's clean
	// environment.
	Env map[string]string `json:"env,omitempty"`
	// URL is the endpoint of an http or sse server.
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to an http or sse server.
	Headers map[string]string `json:"headers,omitempty"`
}

// Servers maps server names, as configured, to their configuration.
type Servers map[string]ServerConfig

// Transport returns the server's transport, stdio when Type is empty.
func (c ServerConfig) Transport() string {
	if c.Type == "" {
		return TransportStdio
	}
	return c.Type
}

// Validate reports what makes the configuration unusable.
func (c ServerConfig) Validate() error {
	switch c.Transport() {
	case TransportStdio:
		if strings.TrimSpace(c.Command) == "" {
			return errors.New(`a stdio server needs a "command"`)
		}
		if c.URL != "" || len(c.Headers) > 0 {
			return errors.New(`"url" and "headers" belong to "type": "http" or "sse" servers, not to a stdio server`)
		}
	case TransportHTTP, TransportSSE:
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 {
			return fmt.Errorf(`"command", "args" and "env" belong to stdio servers, not to a %q server`, c.Type)
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q is not an http:// or https:// URL", c.URL)
		}
		for k := range c.Headers {
			if k == "" || strings.ContainsAny(k, " :\r\n") {
				return fmt.Errorf("header name %q is not valid", k)
			}
		}
	default:
		return fmt.Errorf(`unknown "type" %q (want "stdio", "http" or "sse")`, c.Type)
	}
	return nil
}

// document is the JSON shape of an MCP configuration.
type document struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
}

// Parse reads an MCP configuration document, {"mcpServers": {...}}. A
// document that is not that shape is an error; a server whose entry is
// malformed JSON is too, while a well-formed entry that cannot be used (a
// stdio server without a command) is kept, for Validate to report.
func Parse(data []byte) (Servers, error) {
	var doc document
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("mcp config: %w", err)
	}
	if doc.MCPServers == nil {
		return nil, errors.New(`mcp config: no "mcpServers" object`)
	}
	out := make(Servers, len(doc.MCPServers))
	for name, raw := range doc.MCPServers {
		var c ServerConfig
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&c); err != nil {
			return nil, fmt.Errorf("mcp config: server %q: %w", name, err)
		}
		out[name] = c
	}
	return out, nil
}

// Load reads the value of an --mcp-config flag: JSON text when it starts
// with "{", else the name of a file holding it.
func Load(arg string) (Servers, error) {
	data := []byte(arg)
	if !strings.HasPrefix(strings.TrimSpace(arg), "{") {
		var err error
		if data, err = os.ReadFile(arg); err != nil {
			return nil, fmt.Errorf("mcp config: %w", err)
		}
	}
	return Parse(data)
}

// Merge returns the servers of all the given sets; a later set's server
// replaces an earlier one of the same name.
func Merge(sets ...Servers) Servers {
	out := Servers{}
	for _, s := range sets {
		for name, c := range s {
			out[name] = c
		}
	}
	return out
}

// Names returns the server names, sorted.
func (s Servers) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// varRef matches ${NAME} and ${NAME:-default}.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// Expand replaces ${VAR} and ${VAR:-default} in the command, arguments,
// environment values, URL and header values with what lookup returns, as
// Claude Code does. A variable lookup does not know and that has no default
// is an error. Only the operator's own configuration is expanded: a
// session's could otherwise read the executor's environment.
func (c ServerConfig) Expand(lookup func(string) (string, bool)) (ServerConfig, error) {
	var missing []string
	expand := func(s string) string {
		return varRef.ReplaceAllStringFunc(s, func(ref string) string {
			m := varRef.FindStringSubmatch(ref)
			if v, ok := lookup(m[1]); ok {
				return v
			}
			if m[2] != "" {
				return m[3]
			}
			missing = append(missing, m[1])
			return ref
		})
	}
	out := c
	out.Command = expand(c.Command)
	out.URL = expand(c.URL)
	if c.Args != nil {
		out.Args = make([]string, len(c.Args))
		for i, a := range c.Args {
			out.Args[i] = expand(a)
		}
	}
	out.Env = expandMap(c.Env, expand)
	out.Headers = expandMap(c.Headers, expand)
	if len(missing) > 0 {
		sort.Strings(missing)
		return c, fmt.Errorf("environment variable(s) not set: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func expandMap(m map[string]string, expand func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = expand(v)
	}
	return out
}

// Expand expands every server of s (see ServerConfig.Expand).
func (s Servers) Expand(lookup func(string) (string, bool)) (Servers, error) {
	out := make(Servers, len(s))
	var errs []error
	for _, name := range s.Names() {
		c, err := s[name].Expand(lookup)
		if err != nil {
			errs = append(errs, fmt.Errorf("mcp server %q: %w", name, err))
		}
		out[name] = c
	}
	return out, errors.Join(errs...)
}

// NormalizeName makes a server or tool name fit the Messages API's tool
// name pattern, as Claude Code does: every character outside [a-zA-Z0-9_-]
// becomes "_".
func NormalizeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// ToolName is the name the model calls an MCP tool by:
// mcp__<server>__<tool>, both parts normalised.
func ToolName(server, tool string) string {
	return "mcp__" + NormalizeName(server) + "__" + NormalizeName(tool)
}

// maxToolNameLen is the longest tool name the Messages API accepts; a tool
// whose full name is longer is left out of the pool.
const maxToolNameLen = 128
