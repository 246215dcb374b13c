package orchestrator_test

import (
	"testing"

	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/storetest"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

func TestFileStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) orchestrator.Store {
		st, err := transcript.Open(t.TempDir(), transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return orchestrator.FileStore(st)
	})
}
