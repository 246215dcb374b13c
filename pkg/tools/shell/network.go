package shell

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/tool"
)

// noNetworkNote follows the output of a failed command that ran without
// network and whose output looks like a failed connection or name lookup,
// so that the model knows the cause is the sandbox, not the remote end,
// and can tell the user what to change.
const noNetworkNote = "Note: this command ran in a sandbox without network access (loopback only), " +
	"which is likely why it failed. The user can allow network access with --network host."

// allowlistHint says how a user widens an allowlist.
const allowlistHint = "The user can allow more with --allowed-domains, or sandbox.network.allowedDomains in the settings."

// networkFailure matches what programs print when they cannot reach a host
// or resolve its name: glibc and Python (Errno 101, "Temporary failure in
// name resolution", "Name or service not known"), curl and git ("Could
// not resolve host"), Go ("dial tcp", "lookup HOST on SERVER", "no such
// host"), Node ("getaddrinfo EAI_AGAIN", ENOTFOUND, ENETUNREACH), urllib3,
// cargo and apt.
var networkFailure = regexp.MustCompile(`(?i)network is unreachable|host is unreachable|enetunreach|ehostunreach|` +
	`name resolution|temporary failure resolving|name or service not known|no address associated with hostname|` +
	`could(n't| not) resolve|failed to resolve|unable to resolve|no such host|\blookup \S+ on \S+|\bdial (tcp|udp)\b|` +
	`getaddrinfo|eai_again|enotfound|failed to establish a new connection|\[errno (101|-2|-3)\]`)

// maxNotedDenials is how many refusals of the egress proxy a note names.
const maxNotedDenials = 5

// withNetworkNote appends a note to txt, the result of a failed command
// that started at start, when the sandbox's network is the likely cause:
// without network, when its output s shows a failed connection or
// lookup; with an allowlist, when the egress proxy refused a connection
// while the command ran (naming each refusal and its rule), or when the
// output shows a failed connection the proxy never saw (a program that
// ignores the proxy variables).
func withNetworkNote(env *tool.Env, txt string, s snapshot, start time.Time) string {
	if env.Procs == nil {
		return txt
	}
	failedToConnect := networkFailure.Match(s.head) || networkFailure.Match(bytes.TrimSpace(s.tail))
	switch env.Procs.Network() {
	case sandbox.NetworkNone:
		if failedToConnect {
			return txt + "\n" + noNetworkNote
		}
	case sandbox.NetworkAllowlist:
		if env.Egress == nil {
			return txt
		}
		if refused := refusals(env, start); refused != "" {
			return txt + "\nNote: this command ran in a sandbox whose network is an allowlist, and its egress proxy refused " +
				refused + ". " + reachable(env) + " " + allowlistHint
		}
		if failedToConnect {
			return txt + "\nNote: this command ran in a sandbox whose network is an allowlist: programs reach the network only " +
				"through the HTTP proxy that HTTPS_PROXY and HTTP_PROXY name (plain TCP, UDP and their own DNS lookups fail), " +
				"which is likely why it failed. " + reachable(env) + " " + allowlistHint
		}
	}
	return txt
}

// refusals names the egress proxy's refusals since start, each with its
// reason, or "" when there were none.
func refusals(env *tool.Env, start time.Time) string {
	var seen []string
	for _, d := range env.Egress.DeniedSince(start) {
		what := d.Error()
		if t := d.Target(); t != "" {
			what = fmt.Sprintf("%s (%s)", t, d.Why())
		}
		if !slices.Contains(seen, what) {
			seen = append(seen, what)
		}
	}
	if len(seen) > maxNotedDenials {
		seen = append(seen[:maxNotedDenials], fmt.Sprintf("%d more", len(seen)-maxNotedDenials))
	}
	return strings.Join(seen, "; ")
}

// reachable says what the session may reach.
func reachable(env *tool.Env) string {
	entries := env.Egress.Policy().AllowedEntries()
	if len(entries) == 0 {
		return "The session may reach no host."
	}
	return "The session may reach only " + strings.Join(entries, ", ") + "."
}
