// Command server is an example MCP server for toolwire, written with the
// official MCP Go SDK. toolsvc runs it inside a session's sandbox (stdio, the
// default) or reaches it over streamable HTTP (-http). Its tools exercise
// what the executor does with MCP tools:
//
//	echo     returns its text (annotated read-only: runs in parallel)
//	add      adds two numbers, with structured output
//	slow     counts steps with progress notifications; honours cancellation
//	fail     returns an error result
//	crash    exits in the middle of the call
//	big      returns a long text, to test the output cap
//	image    returns an image and an embedded text resource
//	meta     returns the request's _meta (the trace context toolsvc passes)
//	grow     adds the tool "late" at run time (tools/list_changed)
//	probe    lists its environment, tries to read a path and to connect to
//	         an address: what the sandbox lets a server do
//
// Flags: -http ADDR serves streamable HTTP on ADDR and prints "listening
// URL" on stdout; -require-header "Name: value" refuses HTTP requests
// without that header; -hang never answers (not even initialize).
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	header := flag.String("require-header", "", `with -http, refuse requests without this header ("Name: value")`)
	hang := flag.Bool("hang", false, "never answer anything, not even initialize")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("example-mcp: ")
	if *hang {
		log.Print("hanging on purpose")
		select {}
	}
	if *httpAddr != "" {
		serveHTTP(*httpAddr, *header)
		return
	}
	// Logs go to stderr; stdout carries the protocol.
	log.Print("serving on stdio")
	if err := newServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// serveHTTP serves a new server per session over streamable HTTP.
func serveHTTP(addr, header string) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	handler := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newServer() }, nil))
	if header != "" {
		name, value, _ := strings.Cut(header, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		next := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(name) != value {
				http.Error(w, "missing or wrong "+name, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	fmt.Printf("listening http://%s/mcp\n", lis.Addr())
	log.Fatal(http.Serve(lis, handler))
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type slowIn struct {
	Steps   int    `json:"steps" jsonschema:"how many steps to count"`
	DelayMS int    `json:"delay_ms,omitempty" jsonschema:"milliseconds per step (default 100)"`
	Marker  string `json:"marker,omitempty" jsonschema:"file to create when the call is cancelled"`
}

type failIn struct {
	Message string `json:"message"`
}

type crashIn struct {
	Code int `json:"code,omitempty"`
}

type bigIn struct {
	Chars int `json:"chars"`
}

type probeIn struct {
	Read    string `json:"read,omitempty" jsonschema:"a file to read"`
	Connect string `json:"connect,omitempty" jsonschema:"a host:port to connect to"`
}

// newServer builds the example server with all its tools.
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolwire-example", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns the text it is given.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds a and b."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Counts steps slowly, reporting progress."}, slow)
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails with the given message."},
		func(_ context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("%s", in.Message)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server in the middle of the call."},
		func(_ context.Context, _ *mcp.CallToolRequest, in crashIn) (*mcp.CallToolResult, any, error) {
			log.Printf("crashing with exit code %d", in.Code)
			os.Exit(in.Code)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns a text of the given length."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			var b strings.Builder
			for i := 0; b.Len() < in.Chars; i++ {
				fmt.Fprintf(&b, "line %d\n", i)
			}
			return text(b.String()[:in.Chars]), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Returns a tiny PNG and an embedded text resource."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			png, _ := base64.StdEncoding.DecodeString(tinyPNG)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a red dot:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: png},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "resource text"}},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Returns the _meta of the request."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			b, _ := json.Marshal(req.Params.Meta)
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds the tool late, which tells the client that the tool list changed."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "late", Description: "A tool added at run time."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return text("late tool ran"), nil, nil
				})
			return text("added the tool late"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "probe", Description: "Reports the environment, and whether a path can be read and an address reached."}, probe)
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// slow counts in.Steps steps, one progress notification each, and stops
// when the call is cancelled (creating in.Marker first, if given).
func slow(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
	delay := time.Duration(in.DelayMS) * time.Millisecond
	if delay <= 0 {
		delay = 100 * time.Millisecond
	}
	token := req.Params.GetProgressToken()
	for i := 1; i <= in.Steps; i++ {
		select {
		case <-ctx.Done():
			if in.Marker != "" {
				_ = os.WriteFile(in.Marker, []byte("cancelled at step "+fmt.Sprint(i)+"\n"), 0o644)
			}
			return nil, nil, ctx.Err()
		case <-time.After(delay):
		}
		if token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)})
		}
	}
	return text(fmt.Sprintf("counted %d steps", in.Steps)), nil, nil
}

// probe reports what the server can see and reach.
func probe(ctx context.Context, _ *mcp.CallToolRequest, in probeIn) (*mcp.CallToolResult, any, error) {
	var b bytes.Buffer
	env := os.Environ()
	sort.Strings(env)
	fmt.Fprintf(&b, "uid=%d\n", os.Getuid())
	for _, kv := range env {
		fmt.Fprintf(&b, "env %s\n", kv)
	}
	if in.Read != "" {
		if data, err := os.ReadFile(in.Read); err != nil {
			fmt.Fprintf(&b, "read %s: error: %v\n", in.Read, err)
		} else {
			fmt.Fprintf(&b, "read %s: ok: %q\n", in.Read, data)
		}
	}
	if in.Connect != "" {
		d := net.Dialer{Timeout: 2 * time.Second}
		if c, err := d.DialContext(ctx, "tcp", in.Connect); err != nil {
			fmt.Fprintf(&b, "connect %s: error: %v\n", in.Connect, err)
		} else {
			c.Close()
			fmt.Fprintf(&b, "connect %s: ok\n", in.Connect)
		}
	}
	return text(b.String()), nil, nil
}

// tinyPNG is a 1x1 red PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
