// Package web holds the executor's web tool, WebFetch: it fetches a page
// under the session's network policy and returns it as Markdown.
//
// The fetch runs in the executor, not in a sandboxed process, so it
// applies the policy itself through egress.Dialer: the host against the
// allowed and denied domains, every address the name resolves to
// (loopback, private and link-local ones only where the operator allows
// them), and the connection goes to the checked address, so a DNS answer
// that changes between check and use (rebinding) cannot reach inside.
// Redirects within the same host are followed, each a new checked
// connection; a redirect to another host is reported to the model, as
// Claude Code does, or refused when the policy forbids its target.
//
// Applying the call's prompt to the page with a small model is not done
// here: the orchestrator does it (it holds the model client), and reads
// the page from the result's text and its structured data.
//
// Why one package: fetching under the policy, the redirect rules, turning
// the body into Markdown with its cuts, and the session's cache of pages
// are one tool's steps, each used by nothing else; the policy checks
// themselves live in pkg/egress, shared with the egress proxy.
package web
