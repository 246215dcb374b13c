package web

// webFetchSchema has the properties of Claude Code's WebFetch; the
// descriptions are ours.
const webFetchSchema = `{
  "type": "object",
  "properties": {
    "url": {"type": "string", "format": "uri", "description": "The URL of the page to fetch."},
    "prompt": {"type": "string", "description": "What to find out from the page: the question to answer or the information to extract."}
  },
  "required": ["url", "prompt"],
  "additionalProperties": false
}`

const webFetchDescription = `Fetches a web page and answers a prompt about it.

- Give the full URL and a prompt saying what you want from the page. The page is fetched, turned into Markdown, and a small, fast model answers your prompt from it; you get that answer, not the whole page.
- http:// URLs are fetched as https://.
- The fetch follows redirects within the same host. When a page redirects to another host, you are told the new URL instead: call WebFetch again with it if you want that page.
- Only hosts the session's network policy allows can be fetched; a refused host, and a host that resolves to a local or private address, comes back as an error naming the rule.
- Very large pages are cut, and a fetch that takes too long fails.
- Results are cached for 15 minutes, so fetching the same URL again soon is cheap.
- Read-only: it changes nothing. If an MCP tool that fetches pages is available, prefer it.`
