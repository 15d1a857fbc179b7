package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/cluster"
)

// keyTransport sends every request with an API key.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// clusterMCP connects the official MCP client to the gateway's /mcp with key.
func clusterMCP(t *testing.T, gw, key string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "cluster-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: gw + "/mcp", HTTPClient: &http.Client{Transport: keyTransport{key}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", gw, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpTool calls a tool and decodes its structured content into out; a tool error fails the test.
func mcpTool(t *testing.T, cs *mcp.ClientSession, name string, args, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content[0])
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
}

// Through a cluster's gateway the MCP front door's lists cover every node: session_list shows the
// caller's sessions on both nodes (and not another tenant's), audit_query their records, and a
// tool call on a listed session reaches the node that holds it.
func TestMCPListsAcrossNodes(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t, clusterOpts{}, "ma", "mb")
	key, other := c.tenantKey(t, "acme"), c.tenantKey(t, "umbrella")
	cs := clusterMCP(t, c.gw, key)
	made := map[string]string{} // session → node
	for range 4 {
		var s api.Session
		mcpTool(t, cs, "session_create", map[string]any{}, &s)
		node, ok := cluster.NodeOfSession(s.ID)
		if !ok {
			t.Fatalf("session %s names no node", s.ID)
		}
		made[s.ID] = node
	}
	var theirs api.Session
	mcpTool(t, clusterMCP(t, c.gw, other), "session_create", map[string]any{}, &theirs)
	nodes := map[string]bool{}
	for _, n := range made {
		nodes[n] = true
	}
	if !nodes["ma"] || !nodes["mb"] {
		t.Fatalf("4 sessions went to %v, want both nodes", nodes)
	}

	var list api.SessionList
	mcpTool(t, cs, "session_list", map[string]any{}, &list)
	listed := map[string]bool{}
	for _, s := range list.Sessions {
		listed[s.ID] = true
	}
	for id := range made {
		if !listed[id] {
			t.Errorf("session_list through the gateway lacks %s (on %s): %v", id, made[id], listed)
		}
	}
	if listed[theirs.ID] || len(list.Sessions) != len(made) {
		t.Errorf("session_list shows %d sessions (another tenant's %s: %v), want acme's %d", len(list.Sessions), theirs.ID, listed[theirs.ID], len(made))
	}

	// A call on each listed session reaches its node (session_run by its session_id).
	for id := range made {
		var res api.Result
		mcpTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "in " + id}, &res)
		if res.Stdout != "in "+id {
			t.Errorf("session_run in %s: %q", id, res.Stdout)
		}
	}

	// audit_query: the records of both nodes' sessions.
	var recs struct {
		Records []struct {
			Session string `json:"session"`
			Kind    string `json:"kind"`
		} `json:"records"`
	}
	mcpTool(t, cs, "audit_query", map[string]any{"kind": "session.create"}, &recs)
	audited := map[string]bool{}
	for _, r := range recs.Records {
		audited[r.Session] = true
	}
	for id := range made {
		if !audited[id] {
			t.Errorf("audit_query through the gateway lacks the creation of %s (on %s): %+v", id, made[id], recs.Records)
		}
	}
	if audited[theirs.ID] {
		t.Errorf("audit_query shows another tenant's session")
	}
}
