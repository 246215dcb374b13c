package checkpoint

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A store with a directory is found again by the next one opened on it,
// with its bound, its dropped ids and the previous content of each file.
func TestStoreReopens(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	s.Record("t1", "Write", File{Path: "/w/a", Existed: true, Data: []byte("aaaaaa"), Mode: 0o640})
	s.Record("t2", "Edit", File{Path: "/w/b", Existed: true, Data: []byte("bbbbbb"), Mode: 0o600})
	s.Record("t2", "Edit", File{Path: "/w/b", Existed: true, Data: []byte("later")}) // the first state stays
	s.Record("t3", "Write", File{Path: "/w/c"})

	again, err := Open(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	cps, dropped, bytes, maxBytes := again.List()
	var ids []string
	for _, c := range cps {
		ids = append(ids, c.ToolUseID)
	}
	if strings.Join(ids, ",") != "t2,t3" || !slices.Equal(dropped, []string{"t1"}) || bytes != 6 || maxBytes != 10 {
		t.Fatalf("reopened: %v %v %d %d", ids, dropped, bytes, maxBytes)
	}
	files, undo, err := again.Plan("t2")
	if err != nil || len(files) != 2 || !slices.Equal(undo, []string{"t2", "t3"}) {
		t.Fatalf("plan %v %v %v", files, undo, err)
	}
	if f := files[0]; f.Path != "/w/b" || string(f.Data) != "bbbbbb" || f.Mode != 0o600 || !f.Existed {
		t.Fatalf("b: %+v", f)
	}
	if f := files[1]; f.Path != "/w/c" || f.Existed || f.Data != nil {
		t.Fatalf("c: %+v", f)
	}
	if _, _, err := again.Plan("t1"); !errors.Is(err, ErrDropped) {
		t.Fatalf("dropped: %v", err)
	}
	again.Forget(undo)
	last, err := Open(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if cps, _, bytes, _ := last.List(); len(cps) != 0 || bytes != 0 {
		t.Fatalf("after Forget: %v %d", cps, bytes)
	}
	if _, _, err := last.Plan("t2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("forgotten: %v", err)
	}
}
