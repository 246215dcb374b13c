package tool

import (
	"encoding/json"
	"errors"
)

// Outcome classifies how a call ended. It mirrors the wire enum.
type Outcome int

const (
	// OutcomeSuccess: the tool ran and succeeded.
	OutcomeSuccess Outcome = iota + 1
	// OutcomeToolError: the tool ran and reported a failure.
	OutcomeToolError
	// OutcomeUnknownTool: no tool has that name.
	OutcomeUnknownTool
	// OutcomeInvalidInput: parsing, schema or the tool's checks failed.
	OutcomeInvalidInput
	// OutcomeDenied: a rule, mode, client or hook refused the call.
	OutcomeDenied
	// OutcomeTimeout: the call ran past its timeout.
	OutcomeTimeout
	// OutcomeInterrupted: the call was aborted.
	OutcomeInterrupted
	// OutcomeSiblingError: a failing sibling stopped the call.
	OutcomeSiblingError
	// OutcomeInternalError: the executor failed.
	OutcomeInternalError
	// OutcomeSandboxDenied: the sandbox blocked the action.
	OutcomeSandboxDenied
)

var outcomeNames = map[Outcome]string{
	OutcomeSuccess:       "success",
	OutcomeToolError:     "tool_error",
	OutcomeUnknownTool:   "unknown_tool",
	OutcomeInvalidInput:  "invalid_input",
	OutcomeDenied:        "denied",
	OutcomeTimeout:       "timeout",
	OutcomeInterrupted:   "interrupted",
	OutcomeSiblingError:  "sibling_error",
	OutcomeInternalError: "internal_error",
	OutcomeSandboxDenied: "sandbox_denied",
}

// String returns a short lowercase name, suitable as a metric label.
func (o Outcome) String() string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return "unspecified"
}

// Content is one block of a tool_result: text, an image, or a document.
type Content struct {
	// Text is set for a text block.
	Text string
	// MediaType is set for a binary block: an image ("image/png") or a
	// document (MediaTypePDF).
	MediaType string
	// Data holds the image or document bytes.
	Data []byte
}

// MediaTypePDF is the media type of a PDF document block.
const MediaTypePDF = "application/pdf"

// Document returns a document block holding a PDF.
func Document(pdf []byte) Content { return Content{MediaType: MediaTypePDF, Data: pdf} }

// IsText reports whether the block is text.
func (c Content) IsText() bool { return c.MediaType == "" }

// IsImage reports whether the block is an image.
func (c Content) IsImage() bool { return c.MediaType != "" && !c.IsDocument() }

// IsDocument reports whether the block is a document (a PDF).
func (c Content) IsDocument() bool { return c.MediaType == MediaTypePDF }

// Truncation describes output that was shortened.
type Truncation struct {
	// OriginalBytes is the size of the whole output.
	OriginalBytes uint64
	// OmittedBytes is how much was left out of the content.
	OmittedBytes uint64
	// FullOutputPath is where the whole output can be read with Read.
	FullOutputPath string
}

// Result is the outcome of a call, shaped like an Anthropic tool_result.
type Result struct {
	// Content holds the tool_result blocks.
	Content []Content
	// IsError marks a failed call.
	IsError bool
	// StateIsError makes is_error appear even when false (Claude Code does so
	// for Bash only).
	StateIsError bool
	// Outcome classifies the end of the call. Zero means success or tool
	// error, derived from IsError.
	Outcome Outcome
	// Structured is optional machine-readable data, a JSON object.
	Structured json.RawMessage
	// Truncation is set when output was shortened.
	Truncation *Truncation
	// ExitCode is the process exit code for calls that ran a process to exit.
	ExitCode *int
	// DecidedBy names the rule or hook that allowed or refused the call.
	DecidedBy string
}

// Text returns a successful result with one text block.
func Text(s string) *Result { return &Result{Content: []Content{{Text: s}}} }

// Error returns an is_error result with one text block, as is.
func Error(s string) *Result {
	return &Result{Content: []Content{{Text: s}}, IsError: true, Outcome: OutcomeToolError}
}

// UseError returns an is_error result whose text is wrapped in
// <tool_use_error> tags, the form Claude Code uses for calls that could not
// be carried out as asked.
func UseError(outcome Outcome, s string) *Result {
	return &Result{
		Content: []Content{{Text: WrapUseError(s)}},
		IsError: true,
		Outcome: outcome,
	}
}

// WrapUseError wraps s in <tool_use_error> tags.
func WrapUseError(s string) string { return "<tool_use_error>" + s + "</tool_use_error>" }

// FinalOutcome returns r.Outcome, or the outcome implied by IsError.
func (r *Result) FinalOutcome() Outcome {
	switch {
	case r.Outcome != 0:
		return r.Outcome
	case r.IsError:
		return OutcomeToolError
	default:
		return OutcomeSuccess
	}
}

// TextContent joins the text blocks of r.
func (r *Result) TextContent() string {
	var s string
	for _, c := range r.Content {
		if c.IsText() {
			s += c.Text
		}
	}
	return s
}

// ValidationResult maps an error of Tool.Validate to the call's Result: a
// *DeniedError is a sandbox denial, anything else invalid input; both
// wrapped in <tool_use_error> tags.
func ValidationResult(err error) *Result {
	var denied *DeniedError
	if errors.As(err, &denied) {
		return UseError(OutcomeSandboxDenied, denied.Msg)
	}
	var invalid *InputError
	if errors.As(err, &invalid) {
		return UseError(OutcomeInvalidInput, invalid.Msg)
	}
	return UseError(OutcomeInvalidInput, err.Error())
}
