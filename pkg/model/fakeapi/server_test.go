package fakeapi_test

import (
	"bufio"
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestWireFormat reads the stream with a plain HTTP client: the events come
// in the Messages API's order, each as "event:" and "data:" lines.
func TestWireFormat(t *testing.T) {
	s := fakeapi.New(t, fakeapi.ToolTurn(fakeapi.Text("hi"), fakeapi.ToolUse("toolu_1", "Read", `{"file_path":"a"}`)))
	resp := post(t, s.URL, `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if ct := resp.Header.Get("content-type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			if len(events) == 0 || events[len(events)-1] != name {
				events = append(events, name)
			}
		}
	}
	want := "message_start,ping,content_block_start,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"
	if got := strings.Join(events, ","); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Body.Model != "m" || reqs[0].Finished.IsZero() || reqs[0].Body.Messages[0].Text() != "x" {
		t.Fatalf("recorded = %+v", reqs)
	}
}

func TestErrorReplyAndExhaustedScript(t *testing.T) {
	s := fakeapi.New(t, fakeapi.Overloaded())
	resp := post(t, s.URL, `{"stream":true}`)
	if resp.StatusCode != 529 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp = post(t, s.URL, `{"stream":true}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("beyond the script: status %d", resp.StatusCode)
	}
	if errs := s.Errors(); len(errs) != 1 || !errors.Is(errs[0], fakeapi.ErrScriptExhausted) {
		t.Fatalf("errors = %v", errs)
	}
}

func TestForget(t *testing.T) {
	s := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("one")), fakeapi.EndTurn(fakeapi.Text("two")), fakeapi.EndTurn(fakeapi.Text("three")))
	body := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"stream":true}`
	post(t, s.URL, body).Body.Close()
	post(t, s.URL, body).Body.Close()
	s.Forget()
	if got := s.Requests(); len(got) != 0 {
		t.Fatalf("%d requests after Forget", len(got))
	}
	post(t, s.URL, body).Body.Close()
	got, err := s.WaitRequests(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Index != 2 {
		t.Errorf("after Forget: %d requests, first index %d; want one, index 2", len(got), got[0].Index)
	}
}

// TestShallowKeepsTheBodyRaw checks a shallow server: the model and the
// stream flag are read, the rest is left in Raw, a request that does not
// stream is still refused, and one that is not JSON is still noticed.
func TestShallowKeepsTheBodyRaw(t *testing.T) {
	s := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("ok")), fakeapi.EndTurn(fakeapi.Text("ok")))
	s.SetShallow(true)
	body := `{"stream":true,"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`
	if resp := post(t, s.URL, body); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Body.Model != "m" || !reqs[0].Body.Stream || reqs[0].Body.Messages != nil ||
		reqs[0].JSON != nil || string(reqs[0].Raw) != body {
		t.Fatalf("recorded = %+v", reqs[0])
	}
	if resp := post(t, s.URL, `{"model":"m","messages":[]}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a request that does not stream: status %d, want 400", resp.StatusCode)
	}
	if len(s.Errors()) != 1 {
		t.Fatalf("errors %v, want the one of the request that does not stream", s.Errors())
	}
	s.Push(fakeapi.EndTurn())
	post(t, s.URL, `{"stream":true,`)
	if errs := s.Errors(); len(errs) != 2 || !strings.Contains(errs[1].Error(), "not JSON") {
		t.Errorf("errors %v, want the body that is not JSON named", errs)
	}
}
