package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

// Tools returns the Read, Write, Edit and NotebookEdit tools with default
// settings.
func Tools() []tool.Tool {
	return []tool.Tool{&Read{}, &Write{}, &Edit{}, &NotebookEdit{}}
}

// Messages the model is trained on; they follow Claude Code's wording.
const (
	msgNotRead       = "File has not been read yet. Read it first before writing to it."
	msgModified      = "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."
	msgUpToDate      = " (file state is current in your context — no need to Read it back)"
	msgUnchanged     = "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead."
	msgSameStrings   = "No changes to make: old_string and new_string are exactly the same."
	msgFileExists    = "Cannot create new file - file already exists."
	msgNoWorkspace   = "This session has no file access configured."
	msgFileNotExists = "File does not exist. Note: your current working directory is %s."
)

// Limits of the file tools that are not session settings.
const (
	// DefaultMaxTokens is the size of the largest page Read returns, in
	// estimated tokens (characters / 4).
	DefaultMaxTokens = 25000
	// tokenPageFraction is the percentage of the token cap a cut page fills.
	tokenPageFraction = 85
	// maxEditBytes is the largest file Edit loads.
	maxEditBytes = 256 << 20
	// maxTrackedBytes is the largest file whose content the read record
	// keeps; above it only the modification time is compared.
	maxTrackedBytes = 16 << 20
	// binarySniffBytes is how much of a file is searched for NUL bytes.
	binarySniffBytes = 8192
	// maxImageBytes is 3.75 MiB, 5 MB once base64-encoded: the API's limit.
	maxImageBytes = 3932160
)

// decode unmarshals a schema-valid input into v.
func decode(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, v); err != nil {
		return tool.Invalid(fmt.Sprintf("The input could not be decoded: %v", err))
	}
	return nil
}

// resolve turns a file_path into a workspace Path, relative to the
// session's working directory.
func resolve(env *tool.Env, name string) (workspace.Path, error) {
	if env.Files == nil {
		return workspace.Path{}, tool.Invalid(msgNoWorkspace)
	}
	if strings.TrimSpace(name) == "" {
		return workspace.Path{}, tool.Invalid("file_path must not be empty.")
	}
	p, err := env.Files.Resolve(name, env.Cwd())
	return p, asToolError(err)
}

// asToolError converts the workspace's refusal into the executor's
// vocabulary and leaves other errors alone.
func asToolError(err error) error {
	var de *workspace.DeniedError
	if errors.As(err, &de) {
		return &tool.DeniedError{Msg: de.Msg}
	}
	return err
}

func isDenied(err error) bool {
	var de *tool.DeniedError
	return errors.As(err, &de)
}

// failed turns an error from a check into the result the executor would
// have produced had Validate returned it.
func failed(err error) *tool.Result {
	var de *tool.DeniedError
	if errors.As(err, &de) {
		return tool.UseError(tool.OutcomeSandboxDenied, de.Msg)
	}
	var wde *workspace.DeniedError
	if errors.As(err, &wde) {
		return tool.UseError(tool.OutcomeSandboxDenied, wde.Msg)
	}
	var ie *tool.InputError
	if errors.As(err, &ie) {
		return tool.UseError(tool.OutcomeInvalidInput, ie.Msg)
	}
	return tool.Error(err.Error())
}

// notExist reports whether err means the path is missing, including a
// parent that is a file.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// fileNotFound is the message for a missing file.
func fileNotFound(env *tool.Env) string { return fmt.Sprintf(msgFileNotExists, env.Cwd()) }

// lineNumber accepts a JSON integer, or a string holding one, as models
// sometimes send.
type lineNumber int

// UnmarshalJSON implements json.Unmarshaler.
func (n *lineNumber) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return fmt.Errorf("%s is not an integer", b)
		}
		v = int64(f)
	}
	*n = lineNumber(min(max(v, -1), int64(^uint32(0)>>1)))
	return nil
}

// formatSize renders a byte count the way the size-cap message does:
// "382.8KB", "256KB", "1.2MB".
func formatSize(n int64) string {
	const k = 1024
	unit := func(v float64, suffix string) string {
		s := strconv.FormatFloat(v, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + suffix
	}
	switch {
	case n < k:
		return fmt.Sprintf("%d bytes", n)
	case n < k*k:
		return unit(float64(n)/k, "KB")
	case n < k*k*k:
		return unit(float64(n)/(k*k), "MB")
	default:
		return unit(float64(n)/(k*k*k), "GB")
	}
}
