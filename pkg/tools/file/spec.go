package file

// Input schemas: property names, types, bounds and required fields are
// those of Claude Code's tools; the descriptions are ours.
const (
	readSchema = `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "Path of the file to read, absolute or relative to the working directory."},
    "offset": {"type": "integer", "minimum": 0, "maximum": 9007199254740991, "description": "First line to return, counting from 1. Give it only for files too long to read at once."},
    "limit": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991, "description": "How many lines to return from offset on. Give it only for files too long to read at once."},
    "pages": {"type": "string", "description": "Page range of a PDF file, such as \"1-5\", \"3\" or \"10-\" (to the end); pages count from 1. At most 20 pages per call; required for PDFs of more than 10 pages. Only for PDF files."}
  },
  "required": ["file_path"],
  "additionalProperties": false
}`

	// readValidationSchema is what Read checks: readSchema without the
	// lower bounds. Like Claude Code, Read takes an offset of 0 or below
	// and a limit of 0 as if they were not given.
	readValidationSchema = `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string"},
    "offset": {"type": "integer", "maximum": 9007199254740991},
    "limit": {"type": "integer", "maximum": 9007199254740991},
    "pages": {"type": "string"}
  },
  "required": ["file_path"],
  "additionalProperties": false
}`

	writeSchema = `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "Path of the file to create or overwrite, absolute or relative to the working directory."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["file_path", "content"],
  "additionalProperties": false
}`

	notebookEditSchema = `{
  "type": "object",
  "properties": {
    "notebook_path": {"type": "string", "description": "Path of the .ipynb notebook to change, absolute or relative to the working directory."},
    "cell_id": {"type": "string", "description": "The id of the cell to change, as Read shows it (\"cell-N\", counting from 0, for cells without an id). With edit_mode insert, the new cell goes after this cell, or first when cell_id is left out."},
    "new_source": {"type": "string", "description": "The new source of the cell."},
    "cell_type": {"type": "string", "enum": ["code", "markdown"], "description": "The cell's type. Defaults to the cell's present type; required with edit_mode insert."},
    "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"], "description": "replace (the default), insert or delete."}
  },
  "required": ["notebook_path", "new_source"],
  "additionalProperties": false
}`

	editSchema = `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "Path of the file to change, absolute or relative to the working directory."},
    "old_string": {"type": "string", "description": "The exact text to replace, as it appears in the file (without Read's line-number prefixes). Empty to create a new file."},
    "new_string": {"type": "string", "description": "The replacement text; must differ from old_string."},
    "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence of old_string instead of requiring exactly one."}
  },
  "required": ["file_path", "old_string", "new_string"],
  "additionalProperties": false
}`
)

const readDescription = `Reads a file from the local filesystem and returns its content with line numbers.

- file_path may be absolute or relative to the current working directory.
- Each line comes back as its 1-based number, a tab, then the text, like ` + "`cat -n`" + `. The numbers are not part of the file: leave them out when you quote text in Edit.
- By default the whole file is returned. Files over the size cap (256 KB unless the session sets another) must be read in parts with offset (first line) and limit (number of lines). A page larger than about 25,000 tokens is cut short, and a note at the top tells you which offset and limit fetch the rest; read on instead of guessing what follows.
- PNG, JPEG, GIF and WebP images are returned as images you can look at.
- PDF files are returned as documents you can read, text and page images. A PDF of more than 10 pages must be read in parts with pages (e.g. "1-5"), at most 20 pages per call. Password-protected PDFs cannot be read.
- Jupyter notebooks (.ipynb) are returned as their cells with their outputs, images included; each cell shows the id that NotebookEdit takes. offset and limit do not apply to them.
- Other binary files and directories cannot be read. List a directory with Glob or Bash instead.
- When several files are relevant, read them in parallel in one message.
- If a file has not changed since your last Read of the same range, you get a short note instead of the content again: use what you already have.
- Read a file before you Edit it or overwrite it with Write.`

const writeDescription = `Writes a file to the local filesystem, replacing it completely if it exists.

- file_path may be absolute or relative to the current working directory; missing parent directories are created.
- To overwrite an existing file you must have read it with Read first in this session, and it must not have changed on disk since. Otherwise the call fails and asks you to read it again.
- Prefer Edit for changes to existing files: it sends only the part that changes.
- Do not create documentation or README files unless the user asks for them.
- After a successful Write the file's new state is known; there is no need to read it back.`

const editDescription = `Performs an exact string replacement in a file.

- Read the file in this session before editing it; an edit of a file that changed on disk since that Read fails and asks you to read it again.
- old_string must match the file exactly, including indentation and line breaks. Copy it from the Read output without the line-number prefix (the number and the tab before the text).
- old_string must occur exactly once, unless replace_all is true. If it occurs more often, include more surrounding lines to make it unique, or set replace_all to change every occurrence (handy for renaming a variable).
- new_string must differ from old_string.
- An empty old_string creates the file with new_string as its content, if the file does not exist yet.
- After a successful Edit the file's new state is known; there is no need to read it back.`

const notebookEditDescription = `Replaces, inserts or deletes one cell of a Jupyter notebook (.ipynb file).

- Read the notebook in this session first; an edit of a notebook that changed on disk since that Read fails and asks you to read it again.
- Name the cell by the id Read shows for it. Cells of older notebooks have no id and are named "cell-N", N counting from 0.
- edit_mode replace (the default) sets the cell's source, and its type when cell_type is given; a code cell's old outputs are cleared.
- edit_mode insert adds a new cell after cell_id, or at the start without one; cell_type is required. The result names the new cell's id.
- edit_mode delete removes the cell; new_source is ignored (pass "").
- Use this tool rather than Edit or Write for notebooks: it keeps the notebook's JSON, metadata and other cells' outputs intact.`
