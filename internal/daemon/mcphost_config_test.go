package daemon_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// noTiers is an engine without tiers: hosted servers can be registered, not run.
type noTiers struct{}

func (noTiers) Runtime(sandbox.Tier) (sandbox.Runtime, bool) { return nil, false }

// The daemon's config bounds the sessions of /mcp/servers/NAME (mcp.max_sessions_per_key): the
// session past the bound is refused with a conflict.
func TestHostedSessionBoundsFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.MCP.MaxSessionsPerKey = 1
	hosted, err := daemon.OpenHostedMCP(cfg, noTiers{})
	if err != nil {
		t.Fatal(err)
	}
	defer hosted.Close()
	if err := hosted.Add(mcphost.Server{Name: "x", Image: "node-mcp", Command: []string{"mcp-server-everything"}}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(hosted.Handler("/mcp/servers/"))
	defer ts.Close()
	initialize := func() (int, string) {
		req, _ := http.NewRequest("POST", ts.URL+"/mcp/servers/x", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	if code, body := initialize(); code != http.StatusOK {
		t.Fatalf("the first session: %d %s", code, body)
	}
	if code, body := initialize(); code != http.StatusConflict || !strings.Contains(body, "conflict") {
		t.Errorf("a second session over mcp.max_sessions_per_key 1: %d %s", code, body)
	}
}
