package main

import (
	"fmt"

	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// explainRefusal puts in front of an executor's refusal what to do about
// it, chosen by the refusal's reason (pkg/rpcerr), never by its message.
// Other errors pass unchanged.
func explainRefusal(err error) error {
	reason := rpcerr.Reason(err)
	var hint string
	switch reason {
	case rpcerr.TokenMissing:
		hint = "the executor wants a bearer token: pass --token-file or set $TOOLWIRE_TOKEN"
	case rpcerr.TokenInvalid:
		hint = "the executor refused the bearer token: check --token-file or $TOOLWIRE_TOKEN"
	case rpcerr.ClientCertRequired:
		hint = "the executor wants mutual TLS: pass --tls-cert and --tls-key"
	case rpcerr.ClientCertInvalid:
		hint = "the executor does not accept the client certificate of --tls-cert"
	case rpcerr.SessionExists:
		hint = "session " + rpcerr.Metadata(err, "session_id") + " is open on the executor: choose another --session, or leave it out"
	case rpcerr.WorkspaceInvalid:
		hint = "--workspace must name a directory under the executor's root"
	case rpcerr.PermissionModeDisabled:
		hint = "the executor's operator disabled this --permission-mode: choose another"
	case rpcerr.Draining:
		hint = "the executor is shutting down: run the calls on another one"
	default:
		return err
	}
	return fmt.Errorf("%s (%s): %w", hint, reason, err)
}
