package main_test

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// runCLIEnv is runCLI with more environment variables.
func runCLIEnv(t *testing.T, fake *fakeapi.Server, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(orchestratorBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + fake.URL}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if errs := fake.Errors(); len(errs) > 0 {
		t.Fatalf("fake API errors: %v\nstderr: %s", errs, r.stderr)
	}
	return r
}

// webSite is an HTTPS server on loopback, and a certificate file that
// makes a child process trust it (SSL_CERT_FILE).
func webSite(t *testing.T, h http.Handler) (srv *httptest.Server, port string, certEnv string) {
	t.Helper()
	srv = httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	certFile := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port, "SSL_CERT_FILE=" + certFile
}

// toolResults returns the tool_result blocks of a request's last message
// by tool_use id, as the API receives them.
func webToolResults(t *testing.T, r *fakeapi.Request) map[string]map[string]any {
	t.Helper()
	msgs := r.JSON["messages"].([]any)
	out := map[string]map[string]any{}
	for _, b := range msgs[len(msgs)-1].(map[string]any)["content"].([]any) {
		if b := b.(map[string]any); b["type"] == "tool_result" {
			out[b["tool_use_id"].(string)] = b
		}
	}
	return out
}

// `orchestrator -p` where the model calls WebFetch on pages of a server
// on loopback that the operator's --allowed-addresses lets it reach: a
// page is fetched, turned into Markdown and answered by the small model
// (whose request the fake API sees); a cross-host redirect is reported; a
// redirect to a private address is refused; an oversized page is cut; a
// slow page times out.
func TestHeadlessWebFetch(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/notes", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><script>var hidden = 1;</script></head><body><h1>Release notes</h1><p>Version <b>2.0</b> is out.</p></body></html>`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		chunk := "<p>" + strings.Repeat("y", 1020) + "</p>\n"
		for range 11 << 10 { // about 11 MB
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/internal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.0.0.7/admin", http.StatusFound)
	})
	_, port, certEnv := webSite(t, mux)
	defer close(release)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://localhost:"+port+"/notes", http.StatusMovedPermanently)
	})
	base := "http://127.0.0.1:" + port // upgraded to https by WebFetch

	calls := map[string]string{"toolu_page": "/notes", "toolu_big": "/big", "toolu_slow": "/slow", "toolu_internal": "/internal", "toolu_moved": "/moved"}
	var uses []fakeapi.Block
	for _, id := range []string{"toolu_page", "toolu_big", "toolu_slow", "toolu_internal", "toolu_moved"} {
		uses = append(uses, fakeapi.ToolUse(id, "WebFetch", map[string]any{"url": base + calls[id], "prompt": "Which version is out?"}))
	}
	var mu sync.Mutex
	var small []*fakeapi.Request
	fake := fakeapi.New(t)
	fake.SetFallback(func(r *fakeapi.Request) fakeapi.Reply {
		if r.Body.Model == "claude-small-test" {
			mu.Lock()
			small = append(small, r)
			mu.Unlock()
			text := r.Body.Messages[0].Text()
			if strings.Contains(text, "# Release notes") {
				return fakeapi.EndTurn(fakeapi.Text("The page says version 2.0 is out."))
			}
			return fakeapi.EndTurn(fakeapi.Text("The page is a long run of y."))
		}
		if len(r.Body.Messages) == 1 {
			return fakeapi.ToolTurn(uses...)
		}
		return fakeapi.EndTurn(fakeapi.Text("Version 2.0."))
	})
	res := runCLIEnv(t, fake, []string{certEnv}, "-p", "which version is out?", "--root", sandboxtest.Dir(t), "--sessions-dir", t.TempDir(),
		"--network", "host", "--allowed-addresses", "127.0.0.1", "--web-fetch-model", "claude-small-test", "--web-fetch-timeout", "2s")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := fake.Requests()
	var last *fakeapi.Request
	for _, r := range reqs {
		if r.Body.Model != "claude-small-test" {
			last = r
		}
	}
	if len(reqs) != 4 || len(small) != 2 {
		t.Fatalf("%d requests (%d for the small model), want 2 of the conversation and 2 of the small model (the page and the big one)", len(reqs), len(small))
	}
	for _, r := range small {
		text := r.Body.Messages[0].Text()
		if !strings.Contains(text, "Which version is out?") || len(r.Body.Tools) != 0 {
			t.Errorf("small-model request lacks the prompt or offers tools: %d tools, %.300q", len(r.Body.Tools), text)
		}
		if strings.Contains(text, "# Release notes") && (!strings.Contains(text, "Version **2.0** is out.") || strings.Contains(text, "hidden")) {
			t.Errorf("the page's Markdown: %q", text)
		}
	}
	results := webToolResults(t, last)
	if len(results) != 5 {
		t.Fatalf("%d tool_results, want 5: %s", len(results), last.Raw)
	}
	check := func(id string, isError bool, want string) {
		t.Helper()
		r := results[id]
		content, _ := r["content"].(string)
		if (r["is_error"] == true) != isError || !strings.Contains(content, want) {
			t.Errorf("%s: is_error %v, content %.400q; want is_error %v and %q", id, r["is_error"], content, isError, want)
		}
	}
	check("toolu_page", false, "The page says version 2.0 is out.")
	check("toolu_big", false, "The page is a long run of y.")
	check("toolu_slow", true, "WebFetch of https://127.0.0.1:"+port+"/slow timed out after 2s.")
	check("toolu_internal", true, "egress policy refused 10.0.0.7:80: 10.0.0.7 is a private address (10.0.0.0/8)")
	check("toolu_moved", false, "REDIRECT DETECTED: The URL redirects to a different host.\n\nOriginal URL: https://127.0.0.1:"+port+"/moved\nRedirect URL: https://localhost:"+port+"/notes\nStatus: 301 Moved Permanently")
	for _, r := range small {
		if text := r.Body.Messages[0].Text(); !strings.Contains(text, "# Release notes") &&
			(!strings.Contains(text, "only its first 10485760 bytes were read.]") || !strings.Contains(text, "only its first 100000 are shown.]")) {
			t.Errorf("the big page reached the small model without the notes of its cuts: ...%q", text[max(0, len(text)-600):])
		}
	}
}

// With --network none WebFetch refuses, naming the policy, and no
// small-model request is made.
func TestHeadlessWebFetchNetworkNone(t *testing.T) {
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_1", "WebFetch", map[string]any{"url": "https://example.com/", "prompt": "What is it?"})),
		fakeapi.EndTurn(fakeapi.Text("No network.")),
	)
	res := runCLIEnv(t, fake, nil, "-p", "fetch", "--root", sandboxtest.Dir(t), "--sessions-dir", t.TempDir(), "--network", "none")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	r := webToolResults(t, reqs[1])["toolu_1"]
	want := `<tool_use_error>WebFetch cannot fetch anything in this session: its sandbox network policy is "none" (loopback only)`
	if r["is_error"] != true || !strings.HasPrefix(r["content"].(string), want) {
		t.Fatalf("tool_result %v, want an error starting %q", r, want)
	}
}

// `orchestrator -p --web-search` offers the API's web search tool with its
// domains; the server tool's blocks stay in the transcript as the API sent
// them, through a pause_turn and a tool call that follow.
func TestHeadlessWebSearch(t *testing.T) {
	root := sandboxtest.Dir(t)
	if err := os.WriteFile(filepath.Join(root, "VERSION"), []byte("2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	search := fakeapi.ServerToolUse("srvtoolu_1", "web_search", map[string]any{"query": "toolwire latest version"})
	found := fakeapi.WebSearchResult("srvtoolu_1", fakeapi.SearchResult{URL: "https://docs.example.com/releases", Title: "Releases", PageAge: "2 days"})
	fake := fakeapi.New(t,
		fakeapi.Reply{Message: fakeapi.Turn{Blocks: []fakeapi.Block{search, found}, StopReason: "pause_turn"}},
		fakeapi.ToolTurn(fakeapi.Text("The web says 2.0; checking the file."), fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": filepath.Join(root, "VERSION")})),
		fakeapi.EndTurn(fakeapi.Text("2.0 everywhere.")),
	)
	res := runCLIEnv(t, fake, nil, "-p", "what is the latest version?", "--root", root, "--sessions-dir", t.TempDir(),
		"--web-search", "--web-search-allowed-domains", "docs.example.com", "--web-search-max-uses", "2")
	if res.code != 0 || !strings.Contains(res.stdout, "2.0 everywhere.") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var ws *fakeapi.ToolDef
	for i, tl := range reqs[0].Body.Tools {
		if tl.Type == "web_search_20250305" {
			ws = &reqs[0].Body.Tools[i]
		}
	}
	if ws == nil || ws.Name != "web_search" || ws.MaxUses != 2 || !reflect.DeepEqual(ws.AllowedDomains, []string{"docs.example.com"}) {
		t.Fatalf("web search tool offered: %+v", ws)
	}
	var foundJSON any
	if err := json.Unmarshal(found.Raw, &foundJSON); err != nil {
		t.Fatal(err)
	}
	wantUse := map[string]any{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": map[string]any{"query": "toolwire latest version"}}
	for _, r := range reqs[1:] {
		msgs := r.JSON["messages"].([]any)
		assistant := msgs[1].(map[string]any)
		content := assistant["content"].([]any)
		if assistant["role"] != "assistant" || len(content) != 2 || !reflect.DeepEqual(content[0], wantUse) || !reflect.DeepEqual(content[1], foundJSON) {
			t.Errorf("request %d: the searched message is sent back as %v", r.Index, assistant)
		}
	}
	// After the pause the model went on from its own message.
	if n := len(reqs[1].JSON["messages"].([]any)); n != 2 {
		t.Errorf("the request after pause_turn has %d messages, want 2 (the user's and the paused response)", n)
	}
	if r := webToolResults(t, reqs[2])["toolu_read"]; r == nil || !strings.Contains(r["content"].(string), "2.0") {
		t.Errorf("Read result: %v", r)
	}
}

// With --network allowlist WebFetch follows the session's egress policy:
// an allowed host (here the address of the test's server, which the
// operator's --allowed-addresses lets through) is fetched, another name
// for the same server is refused as not allowed.
func TestHeadlessWebFetchAllowlist(t *testing.T) {
	_, port, certEnv := webSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<p>allowed page</p>")
	}))
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_ok", "WebFetch", map[string]any{"url": "https://127.0.0.1:" + port + "/", "prompt": "What does it say?"}),
			fakeapi.ToolUse("toolu_no", "WebFetch", map[string]any{"url": "https://localhost:" + port + "/", "prompt": "What does it say?"}),
		),
		fakeapi.EndTurn(fakeapi.Text("It says: allowed page.")),
		fakeapi.EndTurn(fakeapi.Text("Done.")),
	)
	res := runCLIEnv(t, fake, []string{certEnv}, "-p", "fetch", "--root", sandboxtest.Dir(t), "--sessions-dir", t.TempDir(),
		"--network", "allowlist", "--allowed-domains", "127.0.0.1", "--allowed-addresses", "127.0.0.1", "--web-fetch-model", "claude-small-test")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || reqs[1].Body.Model != "claude-small-test" || !strings.Contains(reqs[1].Body.Messages[0].Text(), "allowed page") {
		t.Fatalf("%d requests; want the small model's second, with the page", len(reqs))
	}
	results := webToolResults(t, reqs[2])
	if r := results["toolu_ok"]; r["is_error"] != nil || r["content"] != "It says: allowed page." {
		t.Errorf("allowed fetch: %v", r)
	}
	want := "<tool_use_error>WebFetch refused https://localhost:" + port + "/: egress policy refused localhost:" + port + ": localhost is not an allowed domain. This session's network policy allows only 127.0.0.1;"
	if r := results["toolu_no"]; r["is_error"] != true || !strings.HasPrefix(r["content"].(string), want) {
		t.Errorf("refused fetch: %v, want %q...", r, want)
	}
}
