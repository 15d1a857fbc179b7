package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/cli"
)

// mcpStdio runs `agentbox mcp` (the command's function) on pipes and connects the official SDK's
// client to it, as an MCP client that started it would. It returns the client session, and a
// function that hangs up and returns the command's exit code and stderr.
func mcpStdio(t *testing.T, opts cli.MCPOptions) (*mcp.ClientSession, func() (int, string)) {
	t.Helper()
	inR, inW := io.Pipe()   // client → server
	outR, outW := io.Pipe() // server → client
	var stderr syncBuffer
	opts.Stdin, opts.Stdout, opts.Stderr = inR, outW, &stderr
	if opts.NewManager == nil {
		opts.NewManager = fakeFactory(t, nil)
	}
	done := make(chan int, 1)
	go func() {
		code := cli.ServeMCP(context.Background(), opts)
		outW.Close()
		done <- code
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr %s", err, stderr.String())
	}
	var once sync.Once
	var code int
	hangUp := func() (int, string) {
		once.Do(func() {
			cs.Close()
			inW.Close()
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("agentbox mcp did not end after its client hung up")
			}
		})
		return code, stderr.String()
	}
	t.Cleanup(func() { hangUp() })
	return cs, hangUp
}

func runCode(t *testing.T, cs *mcp.ClientSession, code string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func structured(t *testing.T, res *mcp.CallToolResult) api.Result {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %+v", res.Content[0])
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r api.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func errorOf(t *testing.T, res *mcp.CallToolResult) api.ErrorResponse {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %+v", res)
	}
	var body api.ErrorResponse
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// Over a running daemon, the tools call it through the Go client, as its key; its errors come back
// as the API's.
func TestMCPStdioOverDaemon(t *testing.T) {
	url := daemonURL(t)
	cs, hangUp := mcpStdio(t, cli.MCPOptions{URL: url, APIKey: key})
	if r := structured(t, runCode(t, cs, "print(1)")); r.Stdout != "ran: print(1)" || r.Runtime != "nano" {
		t.Errorf("got %+v", r)
	}
	if body := errorOf(t, runCode(t, cs, "timeout")); body.Error.Code != api.CodeTimeout || body.Error.Hint != "raise the timeout" ||
		body.Result == nil || body.Result.Stdout != "started\n" {
		t.Errorf("a timeout: %+v", body)
	}
	code, stderr := hangUp()
	if code != 0 || !strings.Contains(stderr, "over the daemon at "+url) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}

	cs, _ = mcpStdio(t, cli.MCPOptions{URL: url, APIKey: "wrong"})
	if body := errorOf(t, runCode(t, cs, "print(1)")); body.Error.Code != api.CodeUnauthorized || body.Error.Hint == "" {
		t.Errorf("a wrong key: %+v", body)
	}
}

// With no daemon at the default URL, the tools run on an engine of the command's own.
func TestMCPStdioLocalEngine(t *testing.T) {
	started := false
	cs, hangUp := mcpStdio(t, cli.MCPOptions{DefaultURL: deadURL(t), NewManager: fakeFactory(t, &started)})
	if r := structured(t, runCode(t, cs, "print(2)")); r.Stdout != "ran: print(2)" {
		t.Errorf("got %+v", r)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 19 {
		t.Errorf("tools: %v %v", list, err)
	}
	code, stderr := hangUp()
	if !started || code != 0 || !strings.Contains(stderr, "starting a local engine") {
		t.Errorf("started %v, exit %d, stderr %q", started, code, stderr)
	}
}

// A daemon asked for by URL that does not answer is an error, not a local engine.
func TestMCPStdioExplicitURLDown(t *testing.T) {
	started := false
	var stderr bytes.Buffer
	code := cli.ServeMCP(context.Background(), cli.MCPOptions{URL: deadURL(t), Stdin: strings.NewReader(""),
		Stdout: io.Discard, Stderr: &stderr, NewManager: fakeFactory(t, &started)})
	if code != 69 || started || !strings.Contains(stderr.String(), "no agentbox daemon answers") {
		t.Errorf("exit %d, started %v, stderr %q", code, started, stderr.String())
	}
}
