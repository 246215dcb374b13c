package main

import (
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/sandbox"
)

// setupHints names, for each setting an executor's setup can fail on, the
// flags that fix it: for toolsvc serve, or for call --embedded (inProcess),
// whose tools run as the caller unless told otherwise. A client of a
// remote toolsvc sees the serve hints in its session's error.
func setupHints(inProcess bool) execsvc.Hints {
	h := execsvc.Hints{
		sandbox.SettingBackend: "run toolsvc on a kernel with Landlock enabled, or pass --sandbox none to run the tools without file confinement",
		sandbox.SettingNetwork: "run toolsvc as root (or with CAP_SYS_ADMIN and CAP_NET_ADMIN), or pass --network host to let the tools use the host's network",
		sandbox.SettingUser:    "pass --run-as an existing user (a name, uid or uid:gid) who may write the workspace, or make the workspace writable by that user",
		sandbox.SettingSessionUsers: "run toolsvc as root with CAP_SYS_ADMIN, or pass --session-uids off " +
			"(every session's tools then run as one user: --run-as)",
		sandbox.SettingSessionUIDs: "pass --session-uids a range FIRST-LAST of ids that no account and no other toolsvc uses " +
			"(a wider one when sessions ran out of ids), or --session-uids off",
		sandbox.SettingSessionWorkspace: "let toolsvc make each session's workspace (pass --session-dirs, or have the client name a new workspace under --root), " +
			"give the directory to a user other than root and make the directories above it searchable (chmod o+x), " +
			"or pass --session-uids off and --run-as a user who may write it",
		sandbox.SettingPaths:      "name only existing directories in --sandbox-read",
		execsvc.SettingExtraRoots: "name only existing directories in --ro and --rw",
		sandbox.SettingLimits:     "ask for less with --limit-cpu, --limit-file-size or --limit-open-files, or raise the hard limits toolsvc runs with (ulimit -H)",
		execsvc.SettingRoot:       "pass --root an existing directory",
		execsvc.SettingWorkspaceQuota: "run toolsvc as root with --root on a btrfs file system with quotas enabled (btrfs quota enable DIR), " +
			"or pass --session-workspace-quota 0 to make workspaces without one (bound --root from outside then)",
		sandbox.SettingSessionBounds: "allow fewer sessions with --max-sessions, or give toolsvc's cgroup (its container) more tasks or memory",
	}
	if inProcess {
		h[sandbox.SettingUser] = "leave out --run-as so that the tools run as you, or name an existing user (a name, uid or uid:gid) who may write the workspace"
		h[sandbox.SettingSessionUsers] = "leave out --session-uids so that the tools run as you"
		h[sandbox.SettingSessionWorkspace] = "leave out --session-uids so that the tools run as you, or pass --workspace a new directory under --root for toolsvc to make"
		h[sandbox.SettingSessionUIDs] = "leave out --session-uids so that the tools run as you, or pass it a range FIRST-LAST of ids that no account and no other toolsvc uses"
	}
	return h
}
