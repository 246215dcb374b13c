package executor

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/pkg/checkpoint"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/tool"
)

// ListCheckpoints answers with the session's file checkpoints (a
// CheckpointList event).
func (s *Session) ListCheckpoints(req execapi.ListCheckpoints) {
	cps, dropped, bytes, maxBytes := checkpoint.Of(s.env).List()
	out := &execapi.CheckpointList{RequestID: req.RequestID, Dropped: dropped, Bytes: bytes, MaxBytes: maxBytes}
	for _, c := range cps {
		cp := execapi.Checkpoint{ToolUseID: c.ToolUseID, ToolName: c.ToolName, Time: c.Time}
		for _, f := range c.Files {
			cp.Files = append(cp.Files, execapi.CheckpointFile{Path: f.Path, Existed: f.Existed, Mode: f.Mode, Size: f.Size})
		}
		out.Checkpoints = append(out.Checkpoints, cp)
	}
	s.out.push(&Event{Time: time.Now(), CheckpointList: out})
}

// RestoreCheckpoint puts the files the session's file tools changed from
// req.ToolUseID on back to their state before it, and answers with what
// it did (a RestoreResult event). Each file is a write under the session's
// deny rules and the workspace's sandbox: a file they refuse is left as it
// is and reported. The checkpoints restored are forgotten once every file
// was put back; after a partial restore they stay, to try again.
func (s *Session) RestoreCheckpoint(req execapi.RestoreCheckpoint) {
	res := &execapi.RestoreResult{RequestID: req.RequestID, ToolUseID: req.ToolUseID}
	defer func() { s.out.push(&Event{Time: time.Now(), RestoreResult: res}) }()
	store := checkpoint.Of(s.env)
	files, ids, err := store.Plan(req.ToolUseID)
	if err != nil {
		res.Error = err.Error()
		return
	}
	if s.env.Files == nil {
		res.Error = "this session has no file access configured"
		return
	}
	complete := true
	for _, f := range files {
		r := execapi.RestoredFile{Path: f.Path, Action: execapi.RestoreRestored}
		if !f.Existed {
			r.Action = execapi.RestoreRemoved
		}
		if err := s.restoreFile(f); err != nil {
			r.Action, r.Error, complete = execapi.RestoreFailed, err.Error(), false
		}
		res.Files = append(res.Files, r)
	}
	if complete {
		store.Forget(ids)
	}
	s.log.Info("restored checkpoint", "tool_use_id", req.ToolUseID, "files", len(files), "complete", complete)
}

// restoreFile writes back or removes one file, as a Write of it would be
// allowed: a deny rule of the operator or the session refuses it, and the
// workspace applies its roots and deny patterns.
func (s *Session) restoreFile(f checkpoint.File) error {
	input, _ := json.Marshal(map[string]string{"file_path": f.Path})
	policy := s.gate.currentPolicy()
	for _, name := range []string{"Write", "Edit"} {
		d := policy.Decide(permission.Request{Tool: name, Input: input, Cwd: s.env.Cwd(), Workspace: s.env.Files.Dir(), AddDirs: s.env.AddDirs})
		if d.Behavior == permission.Deny && d.Origin != permission.OriginMode {
			return fmt.Errorf("denied by the %s rule %s", d.Origin, d.Rule)
		}
	}
	p, err := s.env.Files.Resolve(f.Path, "")
	if err != nil {
		return err
	}
	if !f.Existed {
		if err := s.env.Files.Remove(p); err != nil {
			return err
		}
		if s.env.Reads != nil {
			s.env.Reads.Forget(f.Path)
		}
		return nil
	}
	fi, err := s.env.Files.RestoreFile(p, f.Data, f.Mode)
	if err != nil {
		return err
	}
	// The model may go on editing the file as it was before the call.
	if s.env.Reads != nil {
		s.env.Reads.Set(f.Path, tool.FileRead{ModTime: fi.ModTime(), Content: string(f.Data)})
	}
	return nil
}
