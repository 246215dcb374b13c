package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

const sessionsUsage = `Usage:
  orchestrator sessions list [--all] [--json] [--sessions-dir DIR]
      the conversations of the current directory (every directory with --all),
      most recently used first
  orchestrator sessions rm [--sessions-dir DIR] ID...
      remove conversations and their transcripts
`

// sessions lists or removes stored conversations.
func sessions(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, sessionsUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("orchestrator sessions "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, sessionsUsage) }
	var c common
	fs.StringVar(&c.sessionsDir, "sessions-dir", "", "directory of session transcripts (default $XDG_STATE_HOME/toolwire/sessions or ~/.local/state/toolwire/sessions)")
	all := fs.Bool("all", false, "list the conversations of every directory")
	asJSON := fs.Bool("json", false, "list as JSON, one object per conversation")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	store, err := c.store()
	if err != nil {
		return err
	}
	defer store.Close()
	switch args[0] {
	case "list", "ls":
		if len(pos) > 0 {
			return usagef("sessions list takes no arguments, not %q", pos)
		}
		dir := ""
		if !*all {
			if dir, err = clientDir(); err != nil {
				return err
			}
		}
		return listSessions(stdout, store, dir, *asJSON)
	case "rm", "remove":
		if len(pos) == 0 {
			return usagef("sessions rm needs the ids of the conversations to remove")
		}
		for _, id := range pos {
			if err := store.Remove(id); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "removed", id)
		}
		return nil
	}
	fmt.Fprintf(stderr, "orchestrator: unknown sessions command %q\n\n%s", args[0], sessionsUsage)
	return errUsage
}

// listSessions prints the stored conversations of dir, or of every
// directory when dir is "".
func listSessions(w io.Writer, store *transcript.Store, dir string, asJSON bool) error {
	list, err := store.List()
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, s := range list {
			if dir != "" && s.Directory != dir {
				continue
			}
			if err := enc.Encode(map[string]any{
				"session_id": s.ID, "directory": s.Directory, "model": s.Model, "created": s.Created,
				"updated": s.Updated, "turns": s.Turns, "messages": s.Messages, "prompt": s.Prompt,
			}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if dir == "" {
		fmt.Fprintln(tw, "SESSION ID\tUPDATED\tTURNS\tDIRECTORY\tPROMPT")
	} else {
		fmt.Fprintln(tw, "SESSION ID\tUPDATED\tTURNS\tPROMPT")
	}
	for _, s := range list {
		prompt := oneLine(s.Prompt, 60)
		updated := s.Updated.Local().Format(time.DateTime)
		switch {
		case dir == "":
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.ID, updated, s.Turns, s.Directory, prompt)
		case s.Directory == dir:
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.ID, updated, s.Turns, prompt)
		}
	}
	return tw.Flush()
}

// oneLine shortens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
