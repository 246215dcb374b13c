package shell

import "encoding/json"

var (
	bashSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"The command to run"},` +
		`"timeout":{"type":"number","description":"Optional timeout in milliseconds (max 600000)"},` +
		`"description":{"type":"string","description":"Clear, concise description of what this command does in 5-10 words"},` +
		`"run_in_background":{"type":"boolean","description":"Set to true to run this command in the background. Use TaskOutput or Read on the output file to read the output later."},` +
		`"dangerouslyDisableSandbox":{"type":"boolean","description":"Accepted for compatibility and ignored: the sandbox always applies."}` +
		`},"required":["command"],"additionalProperties":false}`)

	taskOutputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"task_id":{"type":"string","description":"The id of the background task"},` +
		`"block":{"type":"boolean","default":true,"description":"Whether to wait for the task to finish"},` +
		`"timeout":{"type":"number","default":30000,"minimum":0,"maximum":600000,"description":"How long to wait, in milliseconds"}` +
		`},"required":["task_id"],"additionalProperties":false}`)

	taskStopSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"task_id":{"type":"string","description":"The id of the background task to stop"},` +
		`"shell_id":{"type":"string","description":"Deprecated: use task_id"}` +
		`},"additionalProperties":false}`)

	bashOutputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"bash_id":{"type":"string","description":"The id of the background shell"},` +
		`"filter":{"type":"string","description":"Optional regular expression; only matching output lines are shown"}` +
		`},"required":["bash_id"],"additionalProperties":false}`)

	killShellSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"shell_id":{"type":"string","description":"The id of the background shell to stop"}` +
		`},"required":["shell_id"],"additionalProperties":false}`)
)
