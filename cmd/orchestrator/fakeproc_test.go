package main_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// fakeAPIChildEnv, set to the path of a file, makes this test binary serve
// a fake Messages API instead of running tests (see runFakeAPIChild).
const fakeAPIChildEnv = "TOOLWIRE_TEST_FAKEAPI_READ_FILE"

// runFakeAPIChild serves a fake Messages API that answers every turn of a
// conversation as BenchmarkTurnOverhead scripts it: a Read of the file
// (alternating between the whole file and two lines of it, so that no Read
// is answered with the "unchanged" stub), then, once the Read's result is
// back, a closing text. It prints its URL, then, for every line read from
// stdin, the requests whose replies ended since the line before, one line
// each: the number of messages, when the request arrived and when its
// reply ended (Unix nanoseconds), and whether its newest message holds a
// tool_result marked as an error; then "end".
func runFakeAPIChild(file string) int {
	fake, err := fakeapi.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fake.Close()
	// Only what the replies and the report need is read from a request:
	// decoding its whole history would cost the fake more than the turn.
	fake.SetShallow(true)
	var calls atomic.Int64
	fake.SetFallback(func(r *fakeapi.Request) fakeapi.Reply {
		n := messageCount(r)
		if n%4 == 3 {
			return fakeapi.EndTurn(fakeapi.Text(fmt.Sprintf("done with turn %d", (n+1)/4)))
		}
		input := map[string]any{"file_path": file}
		if turn := (n + 3) / 4; turn%2 == 0 {
			input["offset"], input["limit"] = 1, 2
		}
		return fakeapi.ToolTurn(fakeapi.ToolUse(fmt.Sprintf("toolu_%d", calls.Add(1)), "Read", input))
	})
	fmt.Println(fake.URL)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, err := strconv.Atoi(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		reqs, err := waitFinished(fake, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Before "end": the next request may come the moment the parent
		// reads it. A long conversation's bodies are not kept.
		fake.Forget()
		for _, r := range reqs {
			n := messageCount(r)
			isErr := gjson.GetBytes(r.Raw, fmt.Sprintf("messages.%d.content.#(is_error==true)", n-1)).Exists()
			fmt.Println(n, r.Received.UnixNano(), r.Finished.UnixNano(), isErr)
		}
		fmt.Println("end")
	}
	if errs := fake.Errors(); len(errs) > 0 {
		fmt.Fprintln(os.Stderr, errs)
		return 1
	}
	return 0
}

// messageCount is the number of messages a request sent.
func messageCount(r *fakeapi.Request) int {
	return int(gjson.GetBytes(r.Raw, "messages.#").Int())
}

// waitFinished waits until the fake holds n requests whose replies have
// all ended, and returns them.
func waitFinished(fake *fakeapi.Server, n int) ([]*fakeapi.Request, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		reqs := fake.Requests()
		done := len(reqs) >= n
		for _, r := range reqs {
			done = done && !r.Finished.IsZero()
		}
		switch {
		case done:
			return reqs, nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("fakeapi child: %d of %d replies ended within a minute (errors: %v)", len(reqs), n, fake.Errors())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// fakeAPIProcess is a fake Messages API in a process of its own: this test
// binary, run again as runFakeAPIChild. A benchmark of the orchestrator's
// own time needs it: decoding a long conversation's request costs the fake
// more than a turn costs the orchestrator, and in the benchmark's process
// its garbage collection would land on the orchestrator's time.
type fakeAPIProcess struct {
	URL string
	in  io.Writer
	out *bufio.Scanner
}

// fakeRequest is what fakeAPIProcess reports of one request.
type fakeRequest struct {
	messages           int
	received, finished time.Time
	isError            bool
}

// startFakeAPIProcess starts the fake; it reads file when asked for a
// Read, and ends with tb.
func startFakeAPIProcess(tb testing.TB, file string) *fakeAPIProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fakeAPIChildEnv+"="+file)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		in.Close() // the child ends at the end of its input
		if err := cmd.Wait(); err != nil {
			tb.Errorf("fake API process: %v", err)
		}
	})
	f := &fakeAPIProcess{in: in, out: bufio.NewScanner(out)}
	if !f.out.Scan() {
		tb.Fatalf("fake API process printed no URL: %v", f.out.Err())
	}
	f.URL = f.out.Text()
	return f
}

// finished returns the requests whose replies ended since the last call,
// once there are n of them.
func (f *fakeAPIProcess) finished(n int) ([]fakeRequest, error) {
	if _, err := fmt.Fprintln(f.in, n); err != nil {
		return nil, err
	}
	var reqs []fakeRequest
	for f.out.Scan() {
		line := f.out.Text()
		if line == "end" {
			return reqs, nil
		}
		var r fakeRequest
		var received, finished int64
		if _, err := fmt.Sscan(line, &r.messages, &received, &finished, &r.isError); err != nil {
			return nil, fmt.Errorf("fake API process said %q: %w", line, err)
		}
		r.received, r.finished = time.Unix(0, received), time.Unix(0, finished)
		reqs = append(reqs, r)
	}
	return nil, fmt.Errorf("fake API process ended: %v", f.out.Err())
}
