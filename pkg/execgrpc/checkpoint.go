package execgrpc

import (
	"io/fs"

	"google.golang.org/protobuf/types/known/timestamppb"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
)

func checkpointListToProto(l *execapi.CheckpointList) *executorv1.CheckpointList {
	m := &executorv1.CheckpointList{RequestId: l.RequestID, DroppedToolUseIds: l.Dropped,
		Bytes: uint64(max(l.Bytes, 0)), MaxBytes: uint64(max(l.MaxBytes, 0))}
	for _, c := range l.Checkpoints {
		cp := &executorv1.Checkpoint{ToolUseId: c.ToolUseID, ToolName: c.ToolName, Time: timestamppb.New(c.Time)}
		for _, f := range c.Files {
			cp.Files = append(cp.Files, &executorv1.CheckpointFile{Path: f.Path, Existed: f.Existed,
				Mode: uint32(f.Mode.Perm()) | specialBits(f.Mode), Size: uint64(max(f.Size, 0))})
		}
		m.Checkpoints = append(m.Checkpoints, cp)
	}
	return m
}

func checkpointListFromProto(m *executorv1.CheckpointList) *execapi.CheckpointList {
	l := &execapi.CheckpointList{RequestID: m.GetRequestId(), Dropped: m.GetDroppedToolUseIds(),
		Bytes: int64(m.GetBytes()), MaxBytes: int64(m.GetMaxBytes())}
	for _, c := range m.GetCheckpoints() {
		cp := execapi.Checkpoint{ToolUseID: c.GetToolUseId(), ToolName: c.GetToolName(), Time: timeOf(c.GetTime())}
		for _, f := range c.GetFiles() {
			cp.Files = append(cp.Files, execapi.CheckpointFile{Path: f.GetPath(), Existed: f.GetExisted(),
				Mode: modeOf(f.GetMode()), Size: int64(f.GetSize())})
		}
		l.Checkpoints = append(l.Checkpoints, cp)
	}
	return l
}

// specialBits are the setuid, setgid and sticky bits of mode as Unix
// numbers them.
func specialBits(mode fs.FileMode) uint32 {
	var b uint32
	if mode&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// modeOf turns Unix mode bits back into an fs.FileMode.
func modeOf(bits uint32) fs.FileMode {
	m := fs.FileMode(bits & 0o777)
	if bits&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if bits&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if bits&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

var restoreActions = map[execapi.RestoreAction]executorv1.RestoreAction{
	execapi.RestoreRestored: executorv1.RestoreAction_RESTORE_ACTION_RESTORED,
	execapi.RestoreRemoved:  executorv1.RestoreAction_RESTORE_ACTION_REMOVED,
	execapi.RestoreFailed:   executorv1.RestoreAction_RESTORE_ACTION_FAILED,
}

// RestoreResultToProto converts a RestoreResult; the orchestrator's edge
// relays it too.
func RestoreResultToProto(r *execapi.RestoreResult) *executorv1.RestoreResult {
	m := &executorv1.RestoreResult{RequestId: r.RequestID, ToolUseId: r.ToolUseID, Error: r.Error}
	for _, f := range r.Files {
		m.Files = append(m.Files, &executorv1.RestoredFile{Path: f.Path, Action: restoreActions[f.Action], Error: f.Error})
	}
	return m
}

// RestoreResultFromProto converts a RestoreResult the client received.
func RestoreResultFromProto(m *executorv1.RestoreResult) *execapi.RestoreResult {
	r := &execapi.RestoreResult{RequestID: m.GetRequestId(), ToolUseID: m.GetToolUseId(), Error: m.GetError()}
	for _, f := range m.GetFiles() {
		a := execapi.RestoreAction(0)
		for k, v := range restoreActions {
			if v == f.GetAction() {
				a = k
			}
		}
		r.Files = append(r.Files, execapi.RestoredFile{Path: f.GetPath(), Action: a, Error: f.GetError()})
	}
	return r
}
