package main

import (
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/sandbox"
)

// setupHints name, for each setting the in-process executor's setup can
// fail on, the flags that fix it.
var setupHints = execsvc.Hints{
	sandbox.SettingBackend: "run on a kernel with Landlock enabled, or pass --sandbox none to run the tools without file confinement",
	sandbox.SettingNetwork: "pass --network host (the default) to let the tools use the host's network, or run as root (or with CAP_SYS_ADMIN and CAP_NET_ADMIN)",
	sandbox.SettingUser:    "leave out --run-as so that the tools run as you, or name an existing user (a name, uid or uid:gid) who may write the workspace (--root)",
	execsvc.SettingRoot:    "pass --root an existing directory (the default is the current directory)",
}
