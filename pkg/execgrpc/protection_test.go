package execgrpc_test

import (
	"slices"
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/handshake"
)

// TestProtectionWords: every Protection of the contract is a word clients
// can require (pkg/handshake), so that adding one to the proto without the
// vocabulary fails here.
func TestProtectionWords(t *testing.T) {
	words := handshake.Vocabulary()
	for v, name := range executorv1.Protection_name {
		if v == 0 {
			continue
		}
		if w := handshake.ProtectionWord(name); !slices.Contains(words, w) {
			t.Errorf("%s: %q is not in handshake's vocabulary", name, w)
		}
	}
}
