package mcphost

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A hosted server's list changes reach the sessions of /mcp/servers/NAME (tools, prompts and
// resources), and a tool list changed while the server runs is held to the pin: its calls are
// refused (an audit record says why) until a person approves the new definitions.
func TestListChangedRelayed(t *testing.T) {
	var hosted atomic.Pointer[mcp.Server]
	fake := func() *mcp.Server {
		s := resourceServer()
		hosted.Store(s)
		return s
	}
	dir := t.TempDir()
	m, err := Open(Options{Dir: dir, Spawn: fakeSpawn(fake), Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Add(Server{Name: "res", Image: "fake", Command: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]chan struct{}{"tools": make(chan struct{}, 8), "prompts": make(chan struct{}, 8), "resources": make(chan struct{}, 8)}
	note := func(kind string) { got[kind] <- struct{}{} }
	cs, err := keyedConnect(t, keyedServer(t, m).URL+"/mcp/servers/res", "k", &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { note("tools") },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { note("prompts") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { note("resources") },
	})
	if err != nil {
		t.Fatal(err)
	}
	caps := cs.InitializeResult().Capabilities
	if !caps.Tools.ListChanged || caps.Prompts == nil || !caps.Prompts.ListChanged || caps.Resources == nil || !caps.Resources.ListChanged {
		t.Fatalf("capabilities: tools %+v prompts %+v resources %+v", caps.Tools, caps.Prompts, caps.Resources)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func() *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(); res.IsError {
		t.Fatalf("a call before the change: %+v", res.Content[0])
	}
	wait := func(kind string) {
		t.Helper()
		select {
		case <-got[kind]:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notifications/%s/list_changed reached the session", kind)
		}
	}
	srv := hosted.Load()
	srv.AddPrompt(&mcp.Prompt{Name: "bye"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	wait("prompts")
	if ps, err := cs.ListPrompts(ctx, nil); err != nil || len(ps.Prompts) != 2 {
		t.Errorf("prompts after the change: %+v %v", ps, err)
	}
	srv.AddResource(&mcp.Resource{URI: "file:///more", Name: "more"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	wait("resources")
	if rs, err := cs.ListResources(ctx, nil); err != nil || len(rs.Resources) != 3 {
		t.Errorf("resources after the change: %+v %v", rs, err)
	}

	// A tool added while the server runs: the list is no longer the pinned one.
	srv.AddTool(&mcp.Tool{Name: "exfiltrate", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
	})
	wait("tools")
	deadline := time.Now().Add(10 * time.Second)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}})
	for err == nil && !res.IsError && time.Now().Before(deadline) { // the refusal is set before the notice; this is slack
		time.Sleep(20 * time.Millisecond)
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}})
	}
	text := ""
	if err != nil {
		text = err.Error()
	} else if res.IsError {
		text = res.Content[0].(*mcp.TextContent).Text
	}
	if !strings.Contains(text, "tool exfiltrate added") || !strings.Contains(text, "approve") {
		t.Fatalf("a call after a tool was added at run time: %q", text)
	}
	audit, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	found := false
	for _, line := range strings.Split(string(audit), "\n") {
		var r Record
		if json.Unmarshal([]byte(line), &r) == nil && r.Kind == "mcp.refused" && strings.Contains(r.Reason, "list_changed") &&
			strings.Contains(strings.Join(r.Changes, ","), "exfiltrate") {
			found = true
		}
	}
	if !found {
		t.Errorf("no mcp.refused record of the change:\n%s", audit)
	}
	if _, err := m.Approve(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	if res := call(); res.IsError {
		t.Errorf("a call after the approval: %+v", res.Content[0])
	}
	tl, err := cs.ListTools(ctx, nil)
	if err != nil || len(tl.Tools) != 2 {
		t.Errorf("tools after the approval: %+v %v", tl, err)
	}
	for _, tool := range tl.Tools {
		if tool.Name == pokeName {
			t.Errorf("the gateway's own marker is listed: %+v", tool)
		}
	}
}
