package mcphost

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// awsKey is AWS-shaped (gitleaks' aws-access-token), made here so no file of the tree holds one.
var awsKey = "AKIA" + "Q3EGRWXYZ7LMN4PA"

// gvisorManager runs hosted servers in real gVisor sandboxes of the node-mcp image, or skips.
func gvisorManager(t *testing.T) (*Manager, string) {
	t.Helper()
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc: run `agentbox setup`")
	}
	if _, err := l.Images().Get("node-mcp"); err != nil {
		testenv.Skip(t, "no node-mcp image: agentbox image build node-mcp ("+err.Error()+")")
	}
	rt, err := heavy.New(context.Background(), heavy.Options{Layout: l, StateDir: t.TempDir(), Warm: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	dir := t.TempDir()
	m, err := Open(Options{Dir: dir, Spawn: heavySpawn(rt)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for _, s := range []Server{
		{Name: "everything", Image: "node-mcp", Command: []string{"mcp-server-everything"}},
		{Name: "files", Image: "node-mcp", Command: []string{"sh", "-c", "mkdir -p /tmp/k && printf 'aws_access_key_id = %s\\n' " + awsKey + " > /tmp/k/creds && exec mcp-server-filesystem /tmp/k"}},
	} {
		if err := m.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return m, dir
}

func connect(t *testing.T, m *Manager, name string) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(m.Handler("/mcp/servers/"))
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/servers/" + name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func TestHostedGVisor(t *testing.T) {
	m, dir := gvisorManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := connect(t, m, "everything")
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	t.Logf("server-everything tools via /mcp/servers/everything: %v", names)

	t.Run("call", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello gvisor"}})
		if err != nil || res.IsError || !strings.Contains(text(res), "hello gvisor") {
			t.Fatalf("%v %+v", err, res)
		}
	})
	t.Run("card blocked", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "pay with 4111 1111 1111 1111 please"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "blocked before reaching the server") || strings.Contains(text(res), "4111") {
			t.Fatalf("%v %+v", err, text(res))
		}
		t.Logf("refusal: %s", text(res))
	})
	t.Run("denied tool", func(t *testing.T) {
		m.mu.Lock()
		s := m.servers["everything"]
		s.Deny = []string{"get-sum"}
		m.servers["everything"] = s
		m.mu.Unlock()
		defer func() { m.mu.Lock(); s.Deny = nil; m.servers["everything"] = s; m.mu.Unlock() }()
		res, err := m.Call(ctx, "everything", "get-sum", json.RawMessage(`{"a":1,"b":2}`))
		if err != nil || !res.IsError || !strings.Contains(text(res), "denied") {
			t.Fatalf("%v %+v", err, res)
		}
	})
	t.Run("aws key redacted", func(t *testing.T) {
		fs := connect(t, m, "files")
		tool := "read_text_file"
		res, err := fs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"path": "/tmp/k/creds"}})
		if err != nil || res.IsError {
			t.Fatalf("%v %+v", err, text(res))
		}
		got := text(res)
		if strings.Contains(got, awsKey) || !strings.Contains(got, "REDACTED") {
			t.Fatalf("result not redacted: %q", got)
		}
		t.Logf("result: %q", got)
	})
	t.Run("killed mid-call", func(t *testing.T) {
		h, _, err := m.hostOf(ctx, "everything")
		if err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		p := h.proc.(*heavy.Process)
		h.mu.Unlock()
		// Killed half way through the 5 s operation, so that neither a slow start of the call
		// (a loaded machine: 500 ms after it was sent it may not have reached the server yet)
		// nor its end comes first.
		go func() { time.Sleep(2500 * time.Millisecond); p.Kill() }()
		_, err = m.Call(ctx, "everything", "trigger-long-running-operation", json.RawMessage(`{"duration":5,"steps":5}`))
		if err == nil || !strings.Contains(err.Error(), "ended during the call") {
			t.Fatalf("err = %v", err)
		}
		t.Logf("typed error: %v", err)
		res, err := m.Call(ctx, "everything", "echo", json.RawMessage(`{"message":"again"}`))
		if err != nil || res.IsError || !strings.Contains(text(res), "again") {
			t.Fatalf("next call: %v %+v", err, res)
		}
	})
	audit, err := os.ReadFile(dir + "/audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(audit), awsKey) || strings.Contains(string(audit), "4111 1111") {
		t.Fatalf("the audit log holds a secret:\n%s", audit)
	}
	for _, want := range []string{`"decision":"block"`, `"decision":"redact"`, `"decision":"deny"`, `"kind":"mcp.pin"`} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("audit lacks %s:\n%s", want, audit)
		}
	}
}

// TestPinGVisor: a tool definition that differs from the pin (here the pin is altered, as a
// changed description would make it differ) is refused until approved.
func TestPinGVisor(t *testing.T) {
	m, dir := gvisorManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.Call(ctx, "everything", "echo", json.RawMessage(`{"message":"pin me"}`)); err != nil {
		t.Fatal(err)
	}
	p, ok, err := m.readPin("everything")
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	p.Tools["echo"] = strings.Repeat("0", 64)
	p.Hash = "altered"
	if err := writeJSON(m.pinFile("everything"), p); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	h := m.hosts["everything"]
	m.mu.Unlock()
	h.stop() // the next call starts it again and lists its tools
	_, err = m.Call(ctx, "everything", "echo", json.RawMessage(`{"message":"x"}`))
	if err == nil || !strings.Contains(err.Error(), "tool echo changed") {
		t.Fatalf("err = %v", err)
	}
	t.Logf("refused: %v", err)
	if _, err := m.Approve(ctx, "everything"); err != nil {
		t.Fatal(err)
	}
	res, err := m.Call(ctx, "everything", "echo", json.RawMessage(`{"message":"approved"}`))
	if err != nil || !strings.Contains(text(res), "approved") {
		t.Fatalf("%v %+v", err, res)
	}
	audit, _ := os.ReadFile(dir + "/audit.jsonl")
	if !strings.Contains(string(audit), `"kind":"mcp.approve"`) || !strings.Contains(string(audit), `"kind":"mcp.refused"`) {
		t.Fatalf("audit:\n%s", audit)
	}
}

// heavySpawn runs servers in rt's sandboxes, as the daemon's wiring does (daemon.HostedSpawn):
// the package itself knows no runtime.
func heavySpawn(rt *heavy.Runtime) SpawnFunc {
	return func(ctx context.Context, s Server) (Process, string, error) {
		p, err := rt.Spawn(ctx, heavy.SpawnOptions{Image: s.Image, Argv: s.Command, Session: "mcp:" + s.Name, Profile: s.Profile})
		if err != nil {
			return nil, "", err
		}
		return p, p.ImageHash, nil
	}
}
