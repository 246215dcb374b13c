package search

// Input schemas: property names, types and required fields are those of
// Claude Code's tools; the descriptions are ours.
const (
	globSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Glob pattern for the files to find, such as \"**/*.go\" or \"src/**/*.{ts,tsx}\". Relative patterns are matched against paths below path."},
    "path": {"type": "string", "description": "Directory to search in. Leave it out to search the current working directory; do not pass \"undefined\" or \"null\"."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

	grepSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Regular expression to search for, in ripgrep syntax."},
    "path": {"type": "string", "description": "File or directory to search. Defaults to the current working directory."},
    "glob": {"type": "string", "description": "Only search files whose names match this glob, such as \"*.js\" or \"*.{ts,tsx}\". Several globs may be separated by spaces or commas."},
    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "files_with_matches (default) lists matching files, newest first; content shows matching lines; count shows matching lines per file."},
    "-B": {"type": "number", "description": "Lines of context to show before each match (content mode only)."},
    "-A": {"type": "number", "description": "Lines of context to show after each match (content mode only)."},
    "-C": {"type": "number", "description": "Lines of context to show before and after each match (content mode only)."},
    "context": {"type": "number", "description": "Same as -C."},
    "-n": {"type": "boolean", "description": "Show line numbers (content mode only). Defaults to true."},
    "-i": {"type": "boolean", "description": "Ignore case."},
    "-o": {"type": "boolean", "description": "Show only the matching part of each line (content mode only)."},
    "type": {"type": "string", "description": "Only search files of this ripgrep type, such as go, py, js or rust. Faster than glob for common languages."},
    "head_limit": {"type": "number", "description": "Return at most this many lines (content) or entries (files_with_matches, count). Defaults to 250; 0 means no limit."},
    "offset": {"type": "number", "description": "Skip this many lines or entries before applying head_limit, to page through long results. Defaults to 0."},
    "multiline": {"type": "boolean", "description": "Let the pattern span lines, with . matching newlines too. Defaults to false."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`
)

const globDescription = `Finds files by name with a glob pattern, fast in any size of codebase.

- Patterns use "*" within a directory, "**" across directories, "?", "[abc]" and "{a,b}"; for example "**/*.go" or "src/**/*_test.{ts,tsx}".
- Returns matching file paths, relative to the working directory when they lie below it, most recently modified first, at most 100 of them.
- Names starting with a dot are matched only by pattern parts that start with a dot too, so "**" does not descend into .git and the like.
- Use it to locate files by name; use Grep to search inside files. For open-ended exploration that needs several rounds of searching, plan the searches and run independent ones in parallel.
- ` + quotingNote

const grepDescription = `Searches file contents with regular expressions, using ripgrep.

- Always use this tool for content search instead of running grep or rg through Bash: it is faster and its output is shaped for you.
- The pattern is a ripgrep (Rust) regular expression: "log.*Error", "func\s+\w+". Escape literal braces and other special characters, e.g. "interface\{\}" to find interface{} in Go.
- Narrow the files with glob ("*.js", "**/*.{ts,tsx}") or type ("go", "py", "rust").
- output_mode: "files_with_matches" (default) lists matching files, "content" shows the matching lines (with -A/-B/-C context and line numbers), "count" gives matching lines per file.
- Results are limited to 250 lines or entries unless head_limit says otherwise; use offset to page.
- Patterns match within a single line unless multiline is true.
- Hidden files are searched; .git and files ignored by .gitignore are not.
- ` + quotingNote
