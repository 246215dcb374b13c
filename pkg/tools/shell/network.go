package shell

import (
	"bytes"
	"regexp"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/tool"
)

// noNetworkNote follows the output of a failed command that ran without
// network and whose output looks like a failed connection or name lookup,
// so that the model knows the cause is the sandbox, not the remote end,
// and can tell the user what to change.
const noNetworkNote = "Note: this command ran in a sandbox without network access (loopback only), " +
	"which is likely why it failed. The user can allow network access with --network host."

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

// withNetworkNote appends noNetworkNote to txt, the result of a failed
// command, when its runner has no network and its output s shows a
// network failure.
func withNetworkNote(env *tool.Env, txt string, s snapshot) string {
	if env.Procs == nil || env.Procs.Network() != sandbox.NetworkNone {
		return txt
	}
	if !networkFailure.Match(s.head) && !networkFailure.Match(bytes.TrimSpace(s.tail)) {
		return txt
	}
	return txt + "\n" + noNetworkNote
}
