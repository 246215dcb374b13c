// Package settings reads the parts of a Claude Code settings.json file that
// toolwire uses: permission rules and mode, the PreToolUse and PostToolUse
// hooks, and the file system and network lists of the sandbox.
//
//	{
//	  "permissions": {
//	    "allow": ["Bash(npm run test:*)"],
//	    "ask":   ["Bash(git push:*)"],
//	    "deny":  ["Read(./.env)"],
//	    "defaultMode": "acceptEdits",
//	    "disableBypassPermissionsMode": "disable"
//	  },
//	  "hooks": {
//	    "PostToolUse": [
//	      {"matcher": "Edit|Write",
//	       "hooks": [{"type": "command", "command": "gofmt -w \"$FILE\"", "timeout": 30}]}
//	    ]
//	  },
//	  "sandbox": {
//	    "filesystem": {
//	      "allowWrite": ["~/.cache/my-tool"],
//	      "denyRead":   ["~/.config/my-cloud/**"]
//	    },
//	    "network": {
//	      "allowedDomains": ["*.npmjs.org", "pypi.org:443"]
//	    }
//	  }
//	}
//
// Keys it does not know are ignored, so a file written for Claude Code
// loads as it is. What it does know is checked at load time: malformed
// JSON, a value of the wrong type, a rule or mode that does not parse, a
// hook matcher that is not a valid regular expression or a hook that is
// not a command is an *Error giving the line and column.
//
// Discover finds the files Claude Code layers (the user's, the project's
// and the project's local one) and Merge layers them as Claude Code does:
// permission lists and hooks of every layer apply, and a later layer's
// mode replaces an earlier one's.
//
// Both toolsvc (operator rules) and the orchestrator (session rules it
// sends in the Execute stream's opening message) use it; the conversion to
// and from the wire message lives in settingspb, so this package stays free
// of protobuf.
//
// Why one package of this size (about 800 lines): it mirrors the settings
// file's shape, and reading, validating and merging the layers of one
// shape belong together.
package settings
