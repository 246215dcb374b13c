package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// executorFlags registers the flags that configure an executor, shared by
// serve and call --embedded, and returns a function that builds the config.
// For call --embedded (inProcess) the defaults are those of every embedded
// executor (embedded.Local): tools run as the user who runs toolsvc call,
// with the host's network, and sessions get no users of their own.
func executorFlags(fs *flag.FlagSet, inProcess bool) func() (execsvc.Config, error) {
	networkDefault, uidsDefault := sandbox.NetworkNone, defaultSessionUIDs()
	runAsUsage := "one user for the tool processes of all sessions when toolsvc runs as root, instead of --session-uids (with --session-uids off, the default is the workspace owner, or nobody)"
	if inProcess {
		networkDefault, uidsDefault = embedded.DefaultNetwork, "off"
		runAsUsage = "user the tool processes run as (default: you, the user running toolsvc call)"
	}
	var (
		root         = fs.String("root", ".", "workspace root: sessions work here or in directories under it")
		sessionDirs  = fs.Bool("session-dirs", false, "give each session without a workspace its own directory under --root")
		maxConc      = fs.Int("max-concurrency", envInt("TOOLWIRE_MAX_TOOL_CONCURRENCY", 10), "parallel concurrency-safe calls per session (env TOOLWIRE_MAX_TOOL_CONCURRENCY)")
		defTimeout   = fs.Duration("default-timeout", tool.DefaultTimeout, "Bash timeout when a call gives none")
		maxTimeout   = fs.Duration("max-timeout", tool.DefaultMaxTimeout, "largest Bash timeout a call may ask for")
		maxOutput    = fs.Int("max-output-chars", tool.DefaultMaxOutputChars, "Bash output returned inline before it is shortened")
		maxRead      = fs.Int64("max-read-bytes", tool.DefaultMaxReadBytes, "largest file Read returns without offset/limit")
		retention    = fs.Duration("retention", 5*time.Minute, "how long a disconnected session and its events are kept for resume")
		permTimeout  = fs.Duration("permission-timeout", 5*time.Minute, "how long a call waits for a permission decision before it is denied")
		backend      = fs.String("sandbox", "landlock", `process confinement: "landlock" or "none" (no confinement; only when you mean it)`)
		network      = fs.String("network", networkDefault, `network of tool processes: "none" (loopback only; needs root or CAP_SYS_ADMIN) or "host"`)
		runAs        = fs.String("run-as", "", runAsUsage)
		sessionUIDs  = fs.String("session-uids", uidsDefault, `ids FIRST-LAST to give each session a user of its own from, so sessions cannot see, signal or trace each other's processes (needs root; "off" to disable; --run-as alone disables it)`)
		fsync        = fs.Bool("fsync", false, "fsync every file write before it is renamed into place (durable across power loss; slower)")
		cpuTime      = fs.Duration("limit-cpu", 0, "CPU time of each tool process (0: unlimited)")
		memory       = fs.Int64("limit-memory", 0, "memory of each call in bytes (0: unlimited)")
		processes    = fs.Int("limit-processes", 0, "processes of each call (0: unlimited)")
		fileSize     = fs.Int64("limit-file-size", 0, "largest file a tool process may write, in bytes (0: unlimited)")
		openFiles    = fs.Int("limit-open-files", 0, "open files of each tool process (0: unlimited)")
		settingsFile = fs.String("settings", "", "operator settings file (Claude Code settings.json shape): permission rules, mode and hooks every session gets and cannot loosen")
		traceContent = fs.Bool("trace-content", envBool(executor.TraceContentEnv), "record tool inputs and results (cut to 8 KiB) on the run_tool spans; they may hold secrets (env "+executor.TraceContentEnv+")")
		readOnly     listFlag
		readWrite    listFlag
		deny         listFlag
		sysReadPaths listFlag
	)
	fs.Var(&readOnly, "ro", "extra directory every session may read (repeatable)")
	fs.Var(&readWrite, "rw", "extra directory every session may read and write (repeatable)")
	fs.Var(&deny, "deny", "path pattern file tools refuse, e.g. '**/*.key' (repeatable; replaces the defaults)")
	fs.Var(&sysReadPaths, "sandbox-read", "extra directory sandboxed processes may read, besides the system directories (repeatable)")
	return func() (execsvc.Config, error) {
		explain := setupHints(inProcess).Explain
		if err := oneOf("--sandbox", *backend, sandbox.BackendLandlock, sandbox.BackendNone); err != nil {
			return execsvc.Config{}, err
		}
		if err := oneOf("--network", *network, sandbox.NetworkNone, sandbox.NetworkHost); err != nil {
			return execsvc.Config{}, err
		}
		for name, negative := range map[string]bool{
			"--limit-cpu": *cpuTime < 0, "--limit-memory": *memory < 0, "--limit-processes": *processes < 0,
			"--limit-file-size": *fileSize < 0, "--limit-open-files": *openFiles < 0,
		} {
			if negative {
				return execsvc.Config{}, fmt.Errorf("%s must not be negative (0: unlimited)", name)
			}
		}
		var operator settings.Settings
		if *settingsFile != "" {
			var err error
			if operator, err = settings.LoadSettings(*settingsFile); err != nil {
				return execsvc.Config{}, fmt.Errorf("--settings: %w", err)
			}
		}
		cfg := execsvc.Config{
			Operator:    operator,
			Durable:     *fsync,
			Root:        *root,
			SessionDirs: *sessionDirs,
			ReadOnly:    readOnly,
			ReadWrite:   readWrite,
			Limits: tool.Limits{
				DefaultTimeout: *defTimeout,
				MaxTimeout:     *maxTimeout,
				MaxOutputChars: *maxOutput,
				MaxReadBytes:   *maxRead,
			},
			MaxConcurrency:    *maxConc,
			Retention:         *retention,
			PermissionTimeout: *permTimeout,
			Version:           version,
			Sandbox: sandbox.Config{
				Backend:   *backend,
				Network:   *network,
				RunAsUser: *runAs,
				Limits: sandbox.Limits{
					CPUTime: *cpuTime, Memory: *memory, Processes: *processes,
					FileSize: *fileSize, OpenFiles: *openFiles,
				},
				ReadOnlyPaths: append(sandbox.DefaultReadOnlyPaths(), sysReadPaths...),
			},
			Explain: explain,
		}
		if len(deny) > 0 {
			cfg.Deny = deny
		}
		uids, err := sandbox.ParseUIDRange(*sessionUIDs)
		if err != nil {
			return execsvc.Config{}, fmt.Errorf("--session-uids: %w", err)
		}
		cfg.SessionUIDs = uids
		if *runAs != "" && !isSet(fs, "session-uids") {
			cfg.SessionUIDs = sandbox.UIDRange{}
		}
		if *runAs != "" && !cfg.SessionUIDs.IsZero() {
			return execsvc.Config{}, errors.New(`--run-as (one user for every session) and --session-uids (a user of its own for each) exclude each other: give one, or --session-uids off`)
		}
		cfg.TraceContent = *traceContent
		if inProcess {
			cfg = embedded.Local(cfg)
		}
		return cfg, nil
	}
}

// oneOf checks that flag's value is one of allowed.
func oneOf(flag, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return fmt.Errorf("%s must be %s, not %q", flag, strings.Join(quoteAll(allowed), " or "), value)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func envBool(name string) bool {
	on, _ := strconv.ParseBool(os.Getenv(name))
	return on
}

// defaultSessionUIDs is --session-uids' default: on when toolsvc runs as
// root, which it needs for them.
func defaultSessionUIDs() string {
	if os.Geteuid() == 0 {
		return sandbox.DefaultSessionUIDs.String()
	}
	return "off"
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
