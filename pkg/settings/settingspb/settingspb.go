// Package settingspb converts settings.Settings to and from the
// executorv1.Settings wire message, so that the settings package itself
// stays free of protobuf.
package settingspb

import (
	"fmt"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"google.golang.org/protobuf/types/known/durationpb"
)

var modes = map[permission.Mode]executorv1.PermissionMode{
	"":                         executorv1.PermissionMode_PERMISSION_MODE_UNSPECIFIED,
	permission.ModeDefault:     executorv1.PermissionMode_PERMISSION_MODE_DEFAULT,
	permission.ModeAcceptEdits: executorv1.PermissionMode_PERMISSION_MODE_ACCEPT_EDITS,
	permission.ModePlan:        executorv1.PermissionMode_PERMISSION_MODE_PLAN,
	permission.ModeBypass:      executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS,
}

var events = map[settings.Event]executorv1.HookEvent{
	settings.PreToolUse:  executorv1.HookEvent_HOOK_EVENT_PRE_TOOL_USE,
	settings.PostToolUse: executorv1.HookEvent_HOOK_EVENT_POST_TOOL_USE,
}

// ToProto converts s for the wire. DisableBypass and the file system
// lists of the sandbox are the operator's and do not travel; the network
// lists do, to narrow the executor's allowlist. s should be valid (see
// settings.Settings.Validate).
func ToProto(s settings.Settings) *executorv1.Settings {
	out := &executorv1.Settings{
		Allow: append([]string(nil), s.Permissions.Allow...),
		Ask:   append([]string(nil), s.Permissions.Ask...),
		Deny:  append([]string(nil), s.Permissions.Deny...),
		Mode:  modes[s.Permissions.DefaultMode],
	}
	for _, ev := range settings.Events {
		for _, m := range s.Hooks[ev] {
			h := &executorv1.Hook{Event: events[ev], Matcher: m.Matcher}
			for _, c := range m.Hooks {
				hc := &executorv1.HookCommand{Command: c.Command}
				if c.Timeout > 0 {
					hc.Timeout = durationpb.New(c.Timeout)
				}
				h.Commands = append(h.Commands, hc)
			}
			out.Hooks = append(out.Hooks, h)
		}
	}
	if n := s.Sandbox.Network; n.AllowedDomains != nil || len(n.DeniedDomains) > 0 {
		out.Network = &executorv1.NetworkSettings{DeniedDomains: append([]string(nil), n.DeniedDomains...)}
		if n.AllowedDomains != nil {
			out.Network.AllowedDomains = &executorv1.DomainList{Domains: append([]string(nil), n.AllowedDomains...)}
		}
	}
	return out
}

// FromProto converts a wire message and validates it: rules, mode, hook
// events, matchers and commands. A nil message gives empty settings.
func FromProto(p *executorv1.Settings) (settings.Settings, error) {
	var s settings.Settings
	if p == nil {
		return s, nil
	}
	s.Permissions.Allow = append([]string(nil), p.GetAllow()...)
	s.Permissions.Ask = append([]string(nil), p.GetAsk()...)
	s.Permissions.Deny = append([]string(nil), p.GetDeny()...)
	found := false
	for m, pm := range modes {
		if pm == p.GetMode() {
			s.Permissions.DefaultMode, found = m, true
		}
	}
	if !found {
		return settings.Settings{}, fmt.Errorf("settings: unknown permission mode %v", p.GetMode())
	}
	for i, h := range p.GetHooks() {
		var ev settings.Event
		for e, pe := range events {
			if pe == h.GetEvent() {
				ev = e
			}
		}
		if ev == "" {
			return settings.Settings{}, fmt.Errorf("settings: hooks[%d]: unsupported hook event %v", i, h.GetEvent())
		}
		m := settings.HookMatcher{Matcher: h.GetMatcher()}
		for j, c := range h.GetCommands() {
			hc := settings.HookCommand{Command: c.GetCommand()}
			if t := c.GetTimeout(); t != nil {
				if err := t.CheckValid(); err != nil {
					return settings.Settings{}, fmt.Errorf("settings: hooks[%d].commands[%d].timeout: %w", i, j, err)
				}
				hc.Timeout = t.AsDuration()
			}
			m.Hooks = append(m.Hooks, hc)
		}
		if s.Hooks == nil {
			s.Hooks = make(map[settings.Event][]settings.HookMatcher)
		}
		s.Hooks[ev] = append(s.Hooks[ev], m)
	}
	if n := p.GetNetwork(); n != nil {
		s.Sandbox.Network.DeniedDomains = append([]string(nil), n.GetDeniedDomains()...)
		if l := n.GetAllowedDomains(); l != nil {
			s.Sandbox.Network.AllowedDomains = append([]string{}, l.GetDomains()...)
		}
	}
	if err := s.Validate(); err != nil {
		return settings.Settings{}, err
	}
	return s, nil
}
