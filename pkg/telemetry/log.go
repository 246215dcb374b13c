// Package telemetry sets up what the binaries report about themselves:
// today their structured logs (log/slog, JSON or text).
package telemetry

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLogger returns a process logger writing to w in format ("json" or
// "text") at level ("debug", "info", "warn", "error").
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be json or text, not %q", format)
}
