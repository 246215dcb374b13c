package settingspb

import (
	"reflect"
	"strings"
	"testing"
	"time"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRoundTrip(t *testing.T) {
	s := settings.Settings{
		Permissions: settings.Permissions{
			Allow:       []string{"Bash(npm test:*)"},
			Ask:         []string{"Edit(/infra/**)"},
			Deny:        []string{"Read(./.env)"},
			DefaultMode: permission.ModePlan,
		},
		Hooks: map[settings.Event][]settings.HookMatcher{
			settings.PreToolUse:  {{Matcher: "Bash", Hooks: []settings.HookCommand{{Command: "a"}, {Command: "b", Timeout: 5 * time.Second}}}},
			settings.PostToolUse: {{Matcher: "Edit|Write", Hooks: []settings.HookCommand{{Command: "fmt"}}}},
		},
	}
	p := ToProto(s)
	want := &executorv1.Settings{
		Allow: []string{"Bash(npm test:*)"},
		Ask:   []string{"Edit(/infra/**)"},
		Deny:  []string{"Read(./.env)"},
		Mode:  executorv1.PermissionMode_PERMISSION_MODE_PLAN,
		Hooks: []*executorv1.Hook{
			{Event: executorv1.HookEvent_HOOK_EVENT_PRE_TOOL_USE, Matcher: "Bash", Commands: []*executorv1.HookCommand{
				{Command: "a"}, {Command: "b", Timeout: durationpb.New(5 * time.Second)}}},
			{Event: executorv1.HookEvent_HOOK_EVENT_POST_TOOL_USE, Matcher: "Edit|Write", Commands: []*executorv1.HookCommand{{Command: "fmt"}}},
		},
	}
	if !proto.Equal(p, want) {
		t.Fatalf("ToProto:\n got  %v\n want %v", p, want)
	}
	back, err := FromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n got  %+v\n want %+v", back, s)
	}
}

func TestModes(t *testing.T) {
	for _, m := range []permission.Mode{"", permission.ModeDefault, permission.ModeAcceptEdits, permission.ModePlan, permission.ModeBypass} {
		s := settings.Settings{Permissions: settings.Permissions{DefaultMode: m}}
		back, err := FromProto(ToProto(s))
		if err != nil || back.Permissions.DefaultMode != m {
			t.Errorf("mode %q came back as %q (%v)", m, back.Permissions.DefaultMode, err)
		}
	}
}

func TestFromProtoRejects(t *testing.T) {
	tests := map[string]*executorv1.Settings{
		"bad rule":    {Allow: []string{"Bash("}},
		"bad mode":    {Mode: executorv1.PermissionMode(42)},
		"no event":    {Hooks: []*executorv1.Hook{{Commands: []*executorv1.HookCommand{{Command: "x"}}}}},
		"bad matcher": {Hooks: []*executorv1.Hook{{Event: executorv1.HookEvent_HOOK_EVENT_PRE_TOOL_USE, Matcher: "(", Commands: []*executorv1.HookCommand{{Command: "x"}}}}},
		"no command":  {Hooks: []*executorv1.Hook{{Event: executorv1.HookEvent_HOOK_EVENT_PRE_TOOL_USE}}},
		"bad timeout": {Hooks: []*executorv1.Hook{{Event: executorv1.HookEvent_HOOK_EVENT_PRE_TOOL_USE,
			Commands: []*executorv1.HookCommand{{Command: "x", Timeout: &durationpb.Duration{Seconds: -1}}}}}},
		"bad domain": {Network: &executorv1.NetworkSettings{AllowedDomains: &executorv1.DomainList{Domains: []string{"a b"}}}},
	}
	for name, p := range tests {
		if _, err := FromProto(p); err == nil || !strings.HasPrefix(err.Error(), "settings") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if s, err := FromProto(nil); err != nil || s.Hooks != nil {
		t.Errorf("nil: %+v, %v", s, err)
	}
}

// TestNetwork: the network lists travel, and an empty allowed list stays
// apart from an absent one; the file system lists stay home.
func TestNetwork(t *testing.T) {
	cases := []settings.Network{
		{},
		{AllowedDomains: []string{}},
		{AllowedDomains: []string{"*.npmjs.org", "pypi.org:443"}, DeniedDomains: []string{"evil.example"}},
		{DeniedDomains: []string{"evil.example"}},
	}
	for _, n := range cases {
		p := ToProto(settings.Settings{Sandbox: settings.Sandbox{Network: n, AllowWrite: []string{"/tmp/x"}}})
		back, err := FromProto(p)
		if err != nil {
			t.Fatal(err)
		}
		got := back.Sandbox.Network
		if !reflect.DeepEqual(got, n) && !(len(got.DeniedDomains) == 0 && len(n.DeniedDomains) == 0 && reflect.DeepEqual(got.AllowedDomains, n.AllowedDomains)) {
			t.Errorf("%#v came back as %#v", n, got)
		}
		if (got.AllowedDomains == nil) != (n.AllowedDomains == nil) {
			t.Errorf("%#v: absent and empty allowed lists mixed up: %#v", n, got)
		}
		if back.Sandbox.AllowWrite != nil {
			t.Errorf("file system lists travelled: %v", back.Sandbox.AllowWrite)
		}
	}
}
