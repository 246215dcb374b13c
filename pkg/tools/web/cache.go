package web

import (
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
)

// Cache limits: Claude Code keeps fetched pages for 15 minutes.
const (
	cacheTTL      = 15 * time.Minute
	cacheMaxBytes = 50 << 20
)

// page is a fetched page as WebFetch returns it.
type page struct {
	url       string // after same-host redirects
	code      int
	codeText  string
	bytes     int    // of the body read
	markdown  string // what the result carries
	truncated bool   // the body or the Markdown was cut
	at        time.Time
}

// cache holds a session's recent fetches by requested URL; the oldest
// entries go first when it holds too much.
type cache struct {
	mu      sync.Mutex // guards the fields below
	entries map[string]*page
	order   []string // URLs, oldest first
	size    int
}

type cacheKey struct{}

// sessionCache returns env's cache, made on first use.
func sessionCache(env *tool.Env) *cache {
	return env.Value(cacheKey{}, func() any { return &cache{entries: make(map[string]*page)} }).(*cache)
}

// get returns the page fetched for url within cacheTTL of now.
func (c *cache) get(url string, now time.Time) (*page, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.entries[url]
	if !ok || now.Sub(p.at) > cacheTTL {
		return nil, false
	}
	return p, true
}

// put keeps p as the page of url, dropping expired and then the oldest
// entries while the cache holds more than cacheMaxBytes.
func (c *cache) put(url string, p *page) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(url)
	c.entries[url] = p
	c.order = append(c.order, url)
	c.size += len(p.markdown)
	for len(c.order) > 1 && (c.size > cacheMaxBytes || p.at.Sub(c.entries[c.order[0]].at) > cacheTTL) {
		c.removeLocked(c.order[0])
	}
}

func (c *cache) removeLocked(url string) {
	p, ok := c.entries[url]
	if !ok {
		return
	}
	delete(c.entries, url)
	c.size -= len(p.markdown)
	for i, u := range c.order {
		if u == url {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}
