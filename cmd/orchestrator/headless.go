package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// headless answers one prompt without a client, like `claude -p`, and
// returns the exit code: 0 when the model ended its turn, 1 otherwise.
func headless(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) (int, error) {
	fs := flag.NewFlagSet("orchestrator -p", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c              common
		print          bool
		outputFormat   string
		permissionMode string
		resume         string
		sessionID      string
		systemPrompt   string
		workspace      string
		allowed        listFlag
		disallowed     listFlag
		tools          listFlag
	)
	c.profile = execsvc.ProfileDevelopment
	c.register(fs, "warn")
	fs.BoolVar(&print, "p", false, "answer the prompt and exit (headless)")
	fs.BoolVar(&print, "print", false, "same as -p")
	fs.StringVar(&outputFormat, "output-format", "text", "output: text (the final answer), json (one result object) or stream-json (one JSON event per line)")
	fs.StringVar(&permissionMode, "permission-mode", "", "default, acceptEdits, plan or bypassPermissions")
	fs.StringVar(&resume, "resume", "", "continue the session with this id")
	fs.StringVar(&sessionID, "session-id", "", "id for a new session (default: random)")
	fs.StringVar(&systemPrompt, "system-prompt", "", "replace the system prompt")
	fs.StringVar(&workspace, "workspace", "", "working directory on the executor (default: its root)")
	fs.Var(&allowed, "allowedTools", `permission rules that run without asking, e.g. "Read,Bash(git log:*)" (repeatable)`)
	fs.Var(&disallowed, "disallowedTools", "permission rules that are refused; bare tool names are also not offered (repeatable)")
	fs.Var(&tools, "tools", "offer only these tools, by name (repeatable)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, err
		}
		return 2, errUsage
	}
	if !print {
		fmt.Fprintf(stderr, "orchestrator: unknown command %q\n\n%s", args[0], usage)
		return 2, errUsage
	}
	switch outputFormat {
	case "text", "json", "stream-json":
	default:
		return 2, fmt.Errorf("--output-format must be text, json or stream-json, not %q", outputFormat)
	}
	prompt := strings.Join(pos, " ")
	if prompt == "" && stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return 1, fmt.Errorf("read the prompt from stdin: %w", err)
		}
		prompt = strings.TrimSpace(string(b))
	}
	if prompt == "" {
		return 2, errors.New("no prompt: give it as an argument or on stdin")
	}

	log, err := telemetry.NewLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return 2, err
	}
	client, err := c.modelClient(getenv, log)
	if err != nil {
		if errors.Is(err, model.ErrNoCredentials) {
			return 1, errors.New("no API key: set ANTHROPIC_API_KEY to your Anthropic API key (and ANTHROPIC_BASE_URL to use a compatible endpoint instead of api.anthropic.com)")
		}
		return 1, err
	}
	if err := c.checkEgress(); err != nil {
		return 2, err
	}
	settings, err := c.loadSettings()
	if err != nil {
		return 1, err
	}
	if permissionMode != "" {
		if settings.Mode, err = parseMode(permissionMode); err != nil {
			return 2, fmt.Errorf("--permission-mode: %w", err)
		}
	}
	settings.Allow = append(settings.Allow, allowed...)
	settings.Deny = append(settings.Deny, disallowed...)
	store, err := c.store()
	if err != nil {
		return 1, err
	}
	defer store.Close()
	if c.executor == "" {
		// The in-process executor starts sandboxed processes: adopt orphans.
		if err := sandbox.BecomeSubreaper(); err != nil {
			return 1, fmt.Errorf("become child subreaper: %w", err)
		}
	}
	c.executorSecurity.Getenv = getenv
	if err := c.checkExecutorSecurity(); err != nil {
		return 1, err
	}
	dial := newDialer(c.embeddedConfig(log), c.executorSecurity, log)
	defer dial.Close()
	place := newPlacer(ctx, dial, log)
	defer place.Close()
	orch, err := orchestrator.New(orchestrator.Config{
		Model:           client,
		Dial:            dial.Dial,
		Placer:          place,
		ResumeWindow:    c.resumeWindow,
		DefaultExecutor: c.executorAddr(),
		Store:           store,
		Permissions:     denyUnattended,
		ClientVersion:   version,
		Logger:          log,
	})
	if err != nil {
		return 1, err
	}
	defer orch.Close()

	var sess *orchestrator.Session
	if resume != "" {
		sess, err = orch.Session(ctx, resume)
	} else {
		sess, err = orch.Create(ctx, sessionID, orchestrator.SessionConfig{
			Model:           c.model,
			SystemPrompt:    systemPrompt,
			MaxTokens:       c.maxTokens,
			MaxTurns:        c.maxTurns,
			AllowedTools:    tools,
			DisallowedTools: disallowed,
			Settings:        settings,
			Workspace:       workspace,
			ThinkingBudget:  c.thinkingBudget,
		})
	}
	if err != nil {
		return 1, err
	}

	out := newPrinter(outputFormat, stdout, sess, permissionMode)
	sub := sess.Subscribe(sess.LastSequence())
	followed := make(chan struct{})
	followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollow()
	go func() {
		defer close(followed)
		out.follow(followCtx, sub)
	}()
	res, err := sess.Run(ctx, prompt)
	if err != nil {
		stopFollow()
		<-followed
		return 1, err
	}
	<-followed
	if err := out.result(res); err != nil {
		return 1, fmt.Errorf("write output: %w", err)
	}
	switch res.StopReason {
	case orchestrator.StopEndTurn, orchestrator.StopStopSequence:
		return 0, nil
	}
	return 1, nil
}

// denyUnattended refuses every permission request: in headless mode there
// is nobody to ask.
func denyUnattended(_ string, req *executorv1.PermissionRequest) *executorv1.PermissionDecision {
	return &executorv1.PermissionDecision{
		ToolUseId: req.GetToolUseId(),
		Behavior:  executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_DENY,
		Message: fmt.Sprintf("Permission to use %s was not granted: this session runs headless with nobody to ask. "+
			"The user can allow it with --allowedTools or --permission-mode.", req.GetToolName()),
	}
}
