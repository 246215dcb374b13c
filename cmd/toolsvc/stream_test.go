package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// seqOutput is what `seq 1 n` prints, and where each of its lines starts.
func seqOutput(n int) (out []byte, lineAt []int) {
	lineAt = make([]int, n+1)
	for i := 1; i <= n; i++ {
		lineAt[i] = len(out)
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, '\n')
	}
	return out, lineAt
}

// seqChunk finds where in seqOutput a chunk of progress output belongs,
// by the first whole line in it, and checks that it is that part of the
// output byte for byte. It returns the chunk's offset.
func seqChunk(t *testing.T, want []byte, lineAt []int, chunk []byte) int {
	t.Helper()
	nl := bytes.IndexByte(chunk, '\n')
	end := bytes.IndexByte(chunk[nl+1:], '\n')
	if nl < 0 || end < 0 {
		t.Fatalf("a chunk of %d bytes without a whole line: %q", len(chunk), chunk)
	}
	line, err := strconv.Atoi(string(chunk[nl+1 : nl+1+end]))
	if err != nil || line < 1 || line >= len(lineAt) {
		t.Fatalf("a chunk whose first whole line is %q, not a line of seq's output", chunk[nl+1:nl+1+end])
	}
	off := lineAt[line] - (nl + 1)
	if off < 0 || off+len(chunk) > len(want) || !bytes.Equal(chunk, want[off:off+len(chunk)]) {
		t.Fatalf("a chunk of %d bytes at offset %d is not the output there: %.80q...", len(chunk), off, chunk)
	}
	return off
}

// A command's output reaches the client as Progress byte for byte, in
// order, also across a resumed stream: the executor reuses the buffers of
// progress it has sent, and none may be reused while it can still be
// sent or replayed. The output file holds it all.
func TestServeStreamsOutputIntact(t *testing.T) {
	root := sandboxtest.Dir(t)
	addr, _ := startServe(t, root)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// seq prints the first lines, then waits until the test has resumed
	// the stream (it makes the file gate), then prints the rest a piece at
	// a time, each once the test has had the output before it (it makes
	// ack.<first line of the piece>). So the resumed reader gets output
	// however long the resume takes and however slow the reader is: when a
	// reader takes no event for a while, progress that does not fit is
	// dropped (and counted), and a command that ran ahead of a slow reader
	// would leave it too little to read.
	const lines, firstLines, piece = 3000000, 1000000, 200000 // 22 MB, the first 6.9 MB
	want, lineAt := seqOutput(lines)
	var command strings.Builder
	command.WriteString(`await() { for i in $(seq 1200); do [ -e "$1" ] && return; sleep 0.05; done; return 1; }; `)
	fmt.Fprintf(&command, "seq 1 %d && await gate", firstLines)
	for from := firstLines + 1; from <= lines; from += piece {
		if from > firstLines+1 {
			fmt.Fprintf(&command, " && await ack.%d", from)
		}
		fmt.Fprintf(&command, " && seq %d %d", from, min(from+piece-1, lines))
	}
	input, err := json.Marshal(map[string]string{"command": command.String()})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, breakFirst := context.WithCancel(ctx)
	defer breakFirst()
	stream, err := executorv1.NewExecutorServiceClient(conn).Execute(first)
	if err != nil {
		t.Fatal(err)
	}
	send := func(s executorv1.ExecutorService_ExecuteClient, m *executorv1.ExecuteRequest) {
		t.Helper()
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(stream, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		ClientName: "test", Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS}}}})
	hello, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	session := hello.GetHello().GetSessionId()
	send(stream, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: "toolu_seq", Name: "Bash", AssistantMessageId: "msg_1", InputJson: string(input)}}})

	var (
		last          uint64 // the last sequence number received
		next          int    // where the next chunk may start at the earliest
		before, after int    // output bytes received before and after the resume
		resumed       bool
		result        *executorv1.Result
		acked         = firstLines + 1 + piece // the first line of the next piece to let out
	)
	for result == nil {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream (resumed %v): %v", resumed, err)
		}
		if ev.GetSequence() <= last {
			t.Fatalf("event %d after event %d", ev.GetSequence(), last)
		}
		last = ev.GetSequence()
		if p := ev.GetProgress(); len(p.GetOutput()) > 0 {
			off := seqChunk(t, want, lineAt, p.GetOutput())
			if off < next {
				t.Fatalf("a chunk at offset %d, before the end of the one before it (%d)", off, next)
			}
			next = off + len(p.GetOutput()) + int(p.GetDroppedBytes())
			if resumed {
				after += len(p.GetOutput())
			} else {
				before += len(p.GetOutput())
			}
		}
		result = ev.GetResult()
		for resumed && acked <= lines && next >= lineAt[acked] {
			// The output before this piece is in: let the command print it.
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("ack.%d", acked)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			acked += piece
		}
		if !resumed && (before >= 4<<20 || next >= lineAt[firstLines+1]) {
			// Break the stream and take the session up again from the
			// last event received: after 4 MiB, or once the first part
			// is out (received, or dropped while this reader was slow).
			breakFirst()
			resumed = true
			if stream, err = executorv1.NewExecutorServiceClient(conn).Execute(ctx); err != nil {
				t.Fatal(err)
			}
			send(stream, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{
				SessionId: session, LastSequence: last}}})
			if h, err := stream.Recv(); err != nil || h.GetHello() == nil {
				t.Fatalf("resume: %v %v", h, err)
			}
			if err := os.WriteFile(filepath.Join(root, "gate"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !resumed || before == 0 || after < 4<<20 {
		t.Fatalf("output before the resume %d bytes, after it %d: too little to exercise both readers", before, after)
	}
	if result.GetIsError() || !strings.Contains(result.GetContent()[0].GetText().GetText(), "Output too large") {
		t.Fatalf("result: %.300v", result)
	}
	saved, err := os.ReadFile(result.GetTruncation().GetFullOutputPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, want) {
		t.Fatalf("the output file holds %d bytes, not seq's %d", len(saved), len(want))
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
