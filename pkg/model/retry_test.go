package model_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// TestRetryDelays checks the wait before each retry: the API's retry-after
// when it is no longer than RetryMaxDelay, otherwise exponential backoff
// from RetryBaseDelay, doubling up to RetryMaxDelay, randomized by a
// quarter either way.
func TestRetryDelays(t *testing.T) {
	limited := func(after string) fakeapi.Reply {
		r := fakeapi.RateLimited()
		r.RetryAfter = after
		return r
	}
	fake := fakeapi.New(t,
		fakeapi.Overloaded(),
		limited("0.004"), // 4 ms: honoured
		fakeapi.Overloaded(),
		limited("30"), // longer than RetryMaxDelay: backoff instead
		fakeapi.Overloaded(),
		fakeapi.EndTurn(fakeapi.Text("hi")),
	)
	c := newClient(t, fake, func(cfg *model.Config) {
		cfg.MaxRetries = 5
		cfg.RetryBaseDelay = time.Millisecond
		cfg.RetryMaxDelay = 5 * time.Millisecond
	})
	var rec recorder
	resp, err := c.Stream(context.Background(), model.Request{Messages: userText("hi")}, rec.on)
	if err != nil || resp.Message().Text() != "hi" {
		t.Fatalf("Stream = %+v, %v", resp, err)
	}
	ms := time.Millisecond
	want := []struct{ lo, hi time.Duration }{
		{3 * ms / 4, 5 * ms / 4},   // 1 ms
		{4 * ms, 4 * ms},           // retry-after
		{3 * ms, 5 * ms},           // 4 ms
		{15 * ms / 4, 25 * ms / 4}, // 5 ms, the cap
		{15 * ms / 4, 25 * ms / 4},
	}
	retries := rec.kinds(model.EventRetry)
	if len(retries) != len(want) {
		t.Fatalf("%d retries, want %d", len(retries), len(want))
	}
	for i, r := range retries {
		if d := r.Retry.Delay; d < want[i].lo || d > want[i].hi {
			t.Errorf("retry %d waited %v, want %v to %v", i+1, d, want[i].lo, want[i].hi)
		}
	}
}

// TestCanceledWhileWaitingToRetry cancels the request during a backoff: it
// ends at once, with the cause, and nothing is sent again.
func TestCanceledWhileWaitingToRetry(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.Overloaded(), fakeapi.EndTurn(fakeapi.Text("never")))
	c := newClient(t, fake, func(cfg *model.Config) {
		cfg.RetryBaseDelay = time.Hour
		cfg.RetryMaxDelay = time.Hour
	})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Stream(ctx, model.Request{Messages: userText("hi")}, func(e model.Event) {
		if e.Kind == model.EventRetry {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting to retry") || resp != nil {
		t.Fatalf("Stream = %+v, %v; want no response and a canceled wait", resp, err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}
