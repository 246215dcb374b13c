package main

import (
	"fmt"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
)

// parseMode converts a permission mode name to its wire form.
func parseMode(name string) (executorv1.PermissionMode, error) {
	m, err := permission.ParseMode(name)
	if err != nil {
		return 0, err
	}
	if m == "" {
		return 0, fmt.Errorf("empty permission mode (use default, acceptEdits, plan or bypassPermissions)")
	}
	return settingspb.ToProto(settings.Settings{Permissions: settings.Permissions{DefaultMode: m}}).GetMode(), nil
}

// loadSettings reads the --settings file (Claude Code's settings.json
// shape) into the form sessions pass to the executor, and keeps its
// sandbox lists for the in-process executor; no file gives empty
// settings. A malformed file is refused with the line of the mistake.
func (c *common) loadSettings() (*executorv1.Settings, error) {
	if c.settings == "" {
		return &executorv1.Settings{}, nil
	}
	s, err := settings.LoadSettings(c.settings)
	if err != nil {
		return nil, err
	}
	c.sandboxSettings = s.Sandbox
	p := settingspb.ToProto(s)
	if c.executor == "" {
		// The in-process executor has the network lists as its own
		// (operator's) policy already; as a session's they would narrow
		// --allowed-domains down to the file's list.
		p.Network = nil
	}
	return p, nil
}
