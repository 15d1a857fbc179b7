package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/gateway"
)

// cluster is a gateway over fake nodes, served on loopback.
type testCluster struct {
	gw    *gateway.Gateway
	srv   *httptest.Server
	nodes []*fakeNode
	// tenantKey is a key of another tenant than clientKey's.
	tenantKey string
}

func newCluster(t *testing.T, ids ...string) *testCluster {
	t.Helper()
	return newClusterWith(t, 50*time.Millisecond, nil, ids...)
}

// newClusterWith is newCluster polling every poll, with setup run on the fake nodes before the
// gateway's first poll (a long poll keeps what that poll saw for the whole test).
func newClusterWith(t *testing.T, poll time.Duration, setup func([]*fakeNode), ids ...string) *testCluster {
	t.Helper()
	c := &testCluster{}
	var static cluster.Static
	for _, id := range ids {
		f := newFakeNode(t, id)
		c.nodes = append(c.nodes, f)
		static = append(static, f.node())
	}
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	var err error
	c.tenantKey, _, err = auth.CreateKey(keysFile, "other", "bot", []auth.Scope{auth.ScopeRun, auth.ScopeSessions, auth.ScopeAuditRead}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.NewKeys(clientKey, keysFile)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(c.nodes)
	}
	c.gw, err = gateway.New(gateway.Options{Discovery: static, Keys: keys, Token: token, PollInterval: poll,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.gw.Close() })
	c.srv = httptest.NewServer(c.gw)
	t.Cleanup(c.srv.Close)
	return c
}

// do sends a request through the gateway with key and decodes a JSON answer into out.
func (c *testCluster) do(t *testing.T, key, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// waitPolled waits until a poll of the nodes that began after the call has ended, so the gateway
// has seen what the test changed on a fake node. (A sleep of three poll intervals did not always
// hold one on a loaded machine: the tests run in parallel.)
func (c *testCluster) waitPolled(t *testing.T) {
	t.Helper()
	// The poll under way at the call may have read the node before the change: the one after it.
	want := c.gw.Polls() + 2
	for deadline := time.Now().Add(30 * time.Second); c.gw.Polls() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not poll its nodes in 30 s")
		}
	}
}

type errorBody struct {
	Error struct{ Code, Message, Hint string }
}

func TestPlacementPrefersWarm(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.nodes[0].setWarm("nano", "default", 0)
	c.nodes[0].setWarm("heavy", "python-datascience", 2)
	c.nodes[1].setWarm("nano", "default", 3)
	c.nodes[1].setWarm("heavy", "python-datascience", 0)
	c.waitPolled(t)
	for _, tc := range []struct{ body, node string }{
		{`{"code":"print(1)","runtime":"nano"}`, "b"},
		{`{"code":"import pandas","runtime":"heavy"}`, "a"},
		{`{"code":"import pandas","runtime":"heavy","image":"python-datascience"}`, "a"},
	} {
		var out struct{ Node string }
		if st := c.do(t, clientKey, "POST", "/v1/run", tc.body, &out); st != 200 || out.Node != tc.node {
			t.Errorf("%s went to %q (%d), want %s", tc.body, out.Node, st, tc.node)
		}
	}
}

func TestAutoRunGoesWhereAnythingIsWarm(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.nodes[0].setWarm("nano", "default", 0)
	c.nodes[1].setWarm("heavy", "python-datascience", 1)
	c.nodes[1].setWarm("nano", "default", 0)
	c.waitPolled(t)
	for range 4 {
		var out struct{ Node string }
		if st := c.do(t, clientKey, "POST", "/v1/run", `{"code":"print(1)"}`, &out); st != 200 || out.Node != "b" {
			t.Fatalf("an auto run went to %q (%d), want b, the only node with a warm sandbox", out.Node, st)
		}
	}
}

// A burst of new sessions, faster than the nodes are polled, follows one node's last answer
// (two warm sandboxes) only as far as that answer goes, then spreads. The gateway polls once, at
// its start: a 50 ms poll landed between the burst's requests on a loaded machine, and the fake
// node (whose warm count never drops) then offered two more each time, all six to a.
func TestSessionBurstSpreads(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, time.Hour, func(n []*fakeNode) {
		n[0].setWarm("heavy", "python-datascience", 2)
		n[1].setWarm("heavy", "python-datascience", 0)
	}, "a", "b")
	seen := map[string]int{}
	for range 6 {
		var out struct{ ID string }
		if st := c.do(t, clientKey, "POST", "/v1/sessions", `{"runtime":"heavy"}`, &out); st/100 != 2 {
			t.Fatalf("status %d", st)
		}
		node, _ := cluster.NodeOfSession(out.ID)
		seen[node]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("6 sessions at once over a node with 2 warm sandboxes and one with none: %v, want both", seen)
	}
}

func TestRunsSpreadOverNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	seen := map[string]int{}
	for range 20 {
		var out struct{ Node string }
		if st := c.do(t, clientKey, "POST", "/v1/run", `{"code":"1"}`, &out); st != 200 {
			t.Fatalf("status %d", st)
		}
		seen[out.Node]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("runs over equal nodes: %v, want both", seen)
	}
}

func TestRetryOnRefusedConnection(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.nodes[0].setWarm("nano", "default", 9) // placement's first choice
	c.waitPolled(t)
	c.nodes[0].srv.Close() // gone before the next poll
	var out struct{ Node string }
	if st := c.do(t, clientKey, "POST", "/v1/run", `{"code":"1"}`, &out); st != 200 || out.Node != "b" {
		t.Errorf("run with its first node gone: %d on %q, want 200 on b", st, out.Node)
	}
}

func TestNoNodeIsTyped(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a")
	c.nodes[0].srv.Close()
	c.waitPolled(t)
	var e errorBody
	if st := c.do(t, clientKey, "POST", "/v1/run", `{"code":"1"}`, &e); st != 503 || e.Error.Code != "runtime_unavailable" ||
		!strings.Contains(e.Error.Message, "a: ") || e.Error.Hint == "" {
		t.Errorf("no node: %d %+v", st, e)
	}
	keys, _ := auth.NewKeys(clientKey, "")
	gw, err := gateway.New(gateway.Options{Discovery: cluster.Static{}, Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	gw.ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "no agentbox node is known") {
		t.Errorf("no nodes at all: %d %s", rec.Code, rec.Body)
	}
}

func TestGatewayChecksKeys(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a")
	for _, key := range []string{"", "wrong"} {
		var e errorBody
		if st := c.do(t, key, "POST", "/v1/run", `{"code":"1"}`, &e); st != 401 || e.Error.Code != "unauthorized" {
			t.Errorf("key %q: %d %+v", key, st, e)
		}
	}
	if n := c.nodes[0].runs.Load(); n != 0 {
		t.Errorf("%d refused requests reached a node", n)
	}
	var h struct {
		Status  string
		Role    string
		Healthy int `json:"healthy_nodes"`
	}
	if st := c.do(t, "", "GET", "/v1/health", "", &h); st != 200 || h.Status != "ok" || h.Role != "gateway" || h.Healthy != 1 {
		t.Errorf("health: %d %+v", st, h)
	}
}

func TestSessionStaysOnItsNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	var s struct{ ID string }
	if st := c.do(t, clientKey, "POST", "/v1/sessions", `{}`, &s); st != 201 {
		t.Fatalf("create: %d", st)
	}
	owner, ok := cluster.NodeOfSession(s.ID)
	if !ok {
		t.Fatalf("session id %s names no node", s.ID)
	}
	for range 6 {
		var out struct{ Node string }
		if st := c.do(t, clientKey, "POST", "/v1/sessions/"+s.ID+"/run", `{"code":"x"}`, &out); st != 200 || out.Node != owner {
			t.Fatalf("session run went to %q (%d), want %s", out.Node, st, owner)
		}
	}
	// Another tenant's key finds nothing, through the gateway as on the node.
	var e errorBody
	if st := c.do(t, c.tenantKey, "POST", "/v1/sessions/"+s.ID+"/run", `{"code":"x"}`, &e); st != 404 || e.Error.Code != "not_found" {
		t.Errorf("another tenant's run: %d %+v", st, e)
	}
	// An id that names no node of the cluster is not found, without asking any node.
	if st := c.do(t, clientKey, "GET", "/v1/sessions/sb_0123456789abcdef", "", &e); st != 404 || e.Error.Code != "not_found" {
		t.Errorf("a single machine's id: %d %+v", st, e)
	}
	var list struct{ Sessions []struct{ ID string } }
	if st := c.do(t, clientKey, "GET", "/v1/sessions", "", &list); st != 200 || len(list.Sessions) != 1 || list.Sessions[0].ID != s.ID {
		t.Errorf("list: %d %+v", st, list)
	}
}

func TestSessionMovesWhenItsNodeIsGone(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	a, b := c.nodes[0], c.nodes[1]
	sid := cluster.SessionPrefix("a") + "beef"
	a.mu.Lock()
	a.sessions[sid] = true
	a.mu.Unlock()
	a.srv.Close() // refuses connections; the next poll marks it unhealthy
	var out struct{ Node string }
	if st := c.do(t, clientKey, "POST", "/v1/sessions/"+sid+"/run", `{"code":"x"}`, &out); st != 200 || out.Node != "b" {
		t.Fatalf("a run on a session whose node is gone: %d on %q, want b", st, out.Node)
	}
	b.mu.Lock()
	adopts := append([]string(nil), b.adopts...)
	b.mu.Unlock()
	if len(adopts) != 1 || adopts[0] != sid {
		t.Errorf("adopt requests to b: %v", adopts)
	}
	c.waitPolled(t) // now a is unhealthy in the gateway's view: adopt again (idempotent), no dial
	if st := c.do(t, clientKey, "POST", "/v1/sessions/"+sid+"/run", `{"code":"x"}`, &out); st != 200 || out.Node != "b" {
		t.Fatalf("the next run: %d on %q, want b", st, out.Node)
	}
}

func TestDrainingNodeGetsNoWork(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.nodes[0].mu.Lock()
	c.nodes[0].draining = true
	c.nodes[0].mu.Unlock()
	c.waitPolled(t)
	for range 5 {
		var out struct{ Node string }
		if c.do(t, clientKey, "POST", "/v1/run", `{"code":"1"}`, &out); out.Node != "b" {
			t.Fatalf("a run went to the draining node %q", out.Node)
		}
	}
}

func TestStreamsAreNotBuffered(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a")
	release := make(chan struct{})
	c.nodes[0].mu.Lock()
	c.nodes[0].release = release
	c.nodes[0].mu.Unlock()
	req, _ := http.NewRequest("POST", c.srv.URL+"/v1/run", strings.NewReader(`{"code":"1"}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Accept", "text/event-stream")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	// The first event arrives while the node still holds the run.
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the first event: %v", err)
		}
		if strings.Contains(line, "first from a") {
			break
		}
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "event: result") {
		t.Errorf("the stream's end: %q", rest)
	}
}

func TestAuditAcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.nodes[0].records = []string{`{"seq":0,"time":"2026-11-28T08:00:00Z","kind":"run"}`, `{"seq":1,"time":"2026-11-28T08:00:02Z","kind":"run"}`}
	c.nodes[1].records = []string{`{"seq":0,"time":"2026-11-28T08:00:01Z","kind":"run"}`}
	var out struct {
		Records []struct {
			Node string
			Seq  int64
		}
	}
	if st := c.do(t, clientKey, "GET", "/v1/audit", "", &out); st != 200 {
		t.Fatalf("audit: %d", st)
	}
	var got []string
	for _, r := range out.Records {
		got = append(got, r.Node+"/"+string(rune('0'+r.Seq)))
	}
	if strings.Join(got, " ") != "a/0 b/0 a/1" {
		t.Errorf("merged records %v, want a/0 b/0 a/1 (by time, each naming its node)", got)
	}
	if st := c.do(t, clientKey, "GET", "/v1/audit?limit=2", "", &out); st != 200 || len(out.Records) != 2 || out.Records[1].Node != "a" {
		t.Errorf("limit 2: %+v", out.Records)
	}
}

func TestAuditProofVerified(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a")
	l, err := audit.Open(t.TempDir(), audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for i := range 5 {
		tenant := ""
		if i == 3 {
			tenant = "other"
		}
		if err := l.Append(ctx, audit.Record{Kind: audit.KindRun, Tenant: tenant}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	c.nodes[0].mu.Lock()
	c.nodes[0].log = l
	c.nodes[0].mu.Unlock()
	c.waitPolled(t) // the node's audit key
	var p gateway.ProofAnswer
	if st := c.do(t, clientKey, "GET", "/v1/audit/proof?node=a&seq=2", "", &p); st != 200 || !p.Verified || p.Seq != 2 || p.Node != "a" || p.AuditKey != l.PublicKey() {
		t.Fatalf("proof: %d %+v", st, p)
	}
	if err := p.Verify(l.PublicKey()); err != nil {
		t.Errorf("the answered proof does not verify: %v", err)
	}
	var e errorBody
	if st := c.do(t, c.tenantKey, "GET", "/v1/audit/proof?node=a&seq=2", "", &e); st != 404 {
		t.Errorf("another tenant's record: %d %+v, want 404", st, e)
	}
	if st := c.do(t, c.tenantKey, "GET", "/v1/audit/proof?node=a&seq=3", "", &p); st != 200 || !p.Verified {
		t.Errorf("the tenant's own record: %d", st)
	}
	if st := c.do(t, clientKey, "GET", "/v1/audit/proof?node=a", "", &e); st != 400 || e.Error.Code != "invalid_request" {
		t.Errorf("no seq: %d %+v", st, e)
	}
}

func TestMetricsCarryNodeLabel(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.do(t, clientKey, "POST", "/v1/run", `{"code":"1"}`, nil)
	req, _ := http.NewRequest("GET", c.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	for _, want := range []string{`agentbox_runs_total{tier="nano",node="a"}`, `agentbox_runs_total{tier="nano",node="b"}`,
		`agentbox_gateway_request_seconds_count{code="200",route="/v1/run"} 1`, `agentbox_gateway_node_healthy{node="a"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Count(text, "# TYPE agentbox_runs_total") != 1 {
		t.Errorf("a family split in two:\n%s", text)
	}
}

func TestHostedMCPSessionSticks(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	req, _ := http.NewRequest("POST", c.srv.URL+"/mcp/servers/fs", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	node, inner, ok := strings.Cut(sid, ".")
	if !ok || inner != "mcp-"+node {
		t.Fatalf("MCP session id %q does not name its node", sid)
	}
	for range 4 {
		req, _ := http.NewRequest("POST", c.srv.URL+"/mcp/servers/fs", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Node string }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 200 || out.Node != node {
			t.Fatalf("a later request: %d on %q, want %s", resp.StatusCode, out.Node, node)
		}
	}
}

func TestMCPToolCallGoesToItsSession(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	for _, owner := range []string{"a", "b"} {
		sid := cluster.SessionPrefix(owner) + "00"
		for range 3 {
			var out struct{ Node string }
			call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"session_run","arguments":{"session_id":"` + sid + `","code":"x"}}}`
			if st := c.do(t, clientKey, "POST", "/mcp", call, &out); st != 200 || out.Node != owner {
				t.Fatalf("a tool call on %s went to %q (%d)", sid, out.Node, st)
			}
		}
	}
}

func TestNewSessionGoesToTheLeastLoaded(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	c.nodes[0].mu.Lock()
	for i := range 3 {
		c.nodes[0].sessions[cluster.SessionPrefix("a")+"f"+string(rune('0'+i))] = true
	}
	c.nodes[0].mu.Unlock()
	c.waitPolled(t)
	var s struct{ ID string }
	if st := c.do(t, clientKey, "POST", "/v1/sessions", `{"runtime":"nano"}`, &s); st != 201 {
		t.Fatalf("create: %d", st)
	}
	if node, _ := cluster.NodeOfSession(s.ID); node != "b" {
		t.Errorf("a new session went to %s (3 sessions) rather than b (none)", node)
	}
}

func TestConsoleStaysOnOneNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	for range 4 {
		req, _ := http.NewRequest("GET", c.srv.URL+"/ui/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(gateway.NodeHeader); got != "a" {
			t.Fatalf("the console was served by %q, want a, the first node, every time", got)
		}
	}
}

// A session adopted by b while a was away: a, back, answers not_found for it, says b owns it, and
// the gateway sends the request to b.
func TestSessionFoundAfterItsNodeCameBack(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b")
	a, b := c.nodes[0], c.nodes[1]
	sid := cluster.SessionPrefix("a") + "cafe"
	b.mu.Lock()
	b.sessions[sid] = true
	b.mu.Unlock()
	a.mu.Lock()
	a.movedTo = map[string]*fakeNode{sid: b}
	a.mu.Unlock()
	var out struct{ Node string }
	if st := c.do(t, clientKey, "POST", "/v1/sessions/"+sid+"/run", `{"code":"x"}`, &out); st != 200 || out.Node != "b" {
		t.Fatalf("a session that moved to b: %d on %q", st, out.Node)
	}
	// Another tenant still finds nothing (b applies the tenant), and an unknown session stays
	// not found.
	var e errorBody
	if st := c.do(t, c.tenantKey, "POST", "/v1/sessions/"+sid+"/run", `{"code":"x"}`, &e); st != 404 || e.Error.Code != "not_found" {
		t.Errorf("another tenant: %d %+v", st, e)
	}
	if st := c.do(t, clientKey, "POST", "/v1/sessions/"+cluster.SessionPrefix("a")+"0-none/run", `{"code":"x"}`, &e); st != 404 || e.Error.Code != "not_found" {
		t.Errorf("an unknown session: %d %+v", st, e)
	}
}

// A node slower than a poll to say its capacity (busy on a loaded machine) keeps its last good
// answer for a while instead of making the gateway answer runtime_unavailable.
func TestSlowCapacityAnswerKeepsTheNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a")
	a := c.nodes[0]
	c.waitPolled(t)
	a.infoDelay.Store(int64(400 * time.Millisecond)) // longer than the 300 ms poll bound
	time.Sleep(900 * time.Millisecond)               // polls in it time out
	var out struct{ Node string }
	if st := c.do(t, clientKey, "POST", "/v1/run", `{"code":"x"}`, &out); st != 200 || out.Node != "a" {
		t.Fatalf("a run while a's capacity answers are late: %d on %q, want 200 on a", st, out.Node)
	}
}
