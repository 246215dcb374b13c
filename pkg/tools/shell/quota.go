package shell

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/tool"
)

// quotaNotes says which of the session's disk quotas are full (see
// tempQuotaNote and workspaceQuotaNote): nothing when the session has none
// or none is full.
func quotaNotes(env *tool.Env) []string {
	var notes []string
	for _, q := range []string{tempQuotaNote(env), workspaceQuotaNote(env)} {
		if q != "" {
			notes = append(notes, q)
		}
	}
	return notes
}

// hasQuota reports whether the session has a disk quota that quotaNotes
// can say is full.
func hasQuota(env *tool.Env) bool {
	return (env.TempQuota > 0 && env.TempDir != "") || env.Workspace != nil
}

// tempFullBelow is the free space under which a session's temp directory
// counts as full: a write of any size may fail there.
const tempFullBelow = 64 << 10

// tempQuotaNote says, when the session's temp directory has a file system
// of its own (tool.Env.TempQuota) and it is full (of bytes or of files),
// which limit the command ran into; "" otherwise.
func tempQuotaNote(env *tool.Env) string {
	if env.TempQuota <= 0 || env.TempDir == "" {
		return ""
	}
	var st unix.Statfs_t
	if unix.Statfs(env.TempDir, &st) != nil {
		return ""
	}
	full := ""
	switch {
	case int64(st.Bavail)*st.Bsize < tempFullBelow:
		full = "full"
	case st.Files > 0 && st.Ffree == 0:
		full = "out of files (inodes)"
	default:
		return ""
	}
	return fmt.Sprintf("The session's temp directory %s is %s: its disk quota is %s, and writes past it fail with \"No space left on device\".",
		env.TempDir, full, tool.FormatBytes(env.TempQuota))
}

// workspaceQuotaNote says, when the session's workspace has a disk quota
// of its own (tool.Env.Workspace) and it is full, that the command ran
// into it; "" otherwise. A write that fails at the quota may have asked
// for a large block: the workspace counts as full within 1/64 of its
// quota (at least 1 MiB) of it.
func workspaceQuotaNote(env *tool.Env) string {
	if env.Workspace == nil {
		return ""
	}
	used, limit, ok := env.Workspace()
	if !ok || limit <= 0 || used < limit-max(1<<20, limit/64) {
		return ""
	}
	return fmt.Sprintf("The session's workspace %s is full: its disk quota is %s, and writes past it fail with \"Disk quota exceeded\".",
		env.Files.Dir(), tool.FormatBytes(limit))
}
