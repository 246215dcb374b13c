package file

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/toolwire/toolwire/pkg/checkpoint"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// current is what Write and Edit know about the file they are about to
// replace.
type current struct {
	key     string         // the path as the model named it: the read record's key
	path    workspace.Path // where the write lands (links followed)
	exists  bool
	content string
	info    fs.FileInfo
}

// loadForWrite resolves name for writing and loads the file's present
// content, if any. A directory is refused.
func loadForWrite(env *tool.Env, name string) (current, error) {
	named, err := resolve(env, name)
	if err != nil {
		return current{}, err
	}
	p, err := env.Files.ResolveWrite(named)
	if err != nil {
		return current{}, asToolError(err)
	}
	data, fi, err := env.Files.ReadFile(p, maxEditBytes)
	switch {
	case notExist(err):
		return current{key: named.Abs, path: p}, nil
	case errors.Is(err, syscall.EISDIR):
		return current{}, tool.Invalid(fmt.Sprintf("%s is a directory, not a file.", named.Abs))
	case errors.Is(err, workspace.ErrTooLarge):
		return current{}, tool.Invalid(fmt.Sprintf("%s is too large to change with this tool (over %s).", named.Abs, formatSize(maxEditBytes)))
	case err != nil:
		if err = asToolError(err); !isDenied(err) {
			err = tool.Invalid(err.Error())
		}
		return current{}, err
	}
	return current{key: named.Abs, path: p, exists: true, content: string(data), info: fi}, nil
}

// checkFresh enforces the two rules for replacing an existing file: the
// model must have read it, and it must not have changed since. A newer
// modification time alone is not a change (touch, a checkout that wrote
// the same bytes); the content must differ from what was read too. For
// files too large to keep in the record, any newer time counts.
func checkFresh(env *tool.Env, cur current) error {
	if !cur.exists {
		return nil
	}
	rec, ok := env.Reads.Get(cur.key)
	if !ok {
		return tool.Invalid(msgNotRead)
	}
	if cur.info.ModTime().After(rec.ModTime) && rec.Content != cur.content {
		return tool.Invalid(msgModified)
	}
	return nil
}

// remember records the file's state before call changes it, in the
// session's checkpoints (pkg/checkpoint).
func remember(env *tool.Env, call *tool.Call, cur current) {
	f := checkpoint.File{Path: cur.path.Abs, Existed: cur.exists}
	if cur.exists {
		f.Data = []byte(cur.content)
		f.Mode = cur.info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	}
	checkpoint.Of(env).Record(call.ID, call.Name, f)
}

// write replaces the file and notes the write in the session's read
// record, so that the model can go on editing without reading it back.
func write(env *tool.Env, cur current, content string) error {
	fi, err := env.Files.WriteFile(cur.path, []byte(content))
	if errors.Is(err, syscall.EDQUOT) && env.Workspace != nil {
		if _, limit, ok := env.Workspace(); ok && limit > 0 {
			return fmt.Errorf("%w: the session's workspace quota (%s) was reached", err, tool.FormatBytes(limit))
		}
	}
	if err != nil {
		return asToolError(err)
	}
	rec := tool.FileRead{ModTime: fi.ModTime()}
	if len(content) <= maxTrackedBytes {
		rec.Content = content
	}
	env.Reads.Set(cur.key, rec)
	return nil
}
