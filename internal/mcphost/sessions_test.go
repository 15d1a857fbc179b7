package mcphost

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ownerKey carries the test's key (the X-Test-Key header) as the daemon's auth would.
type ownerKey struct{}

// keyedServer serves m's handler, each request's owner the X-Test-Key header.
func keyedServer(t *testing.T, m *Manager) *httptest.Server {
	t.Helper()
	h := m.Handler("/mcp/servers/")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, r.Header.Get("X-Test-Key"))))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testOwner(ctx context.Context) string { s, _ := ctx.Value(ownerKey{}).(string); return s }

// keyTransport adds the X-Test-Key header.
type keyTransport string

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Key", string(k))
	return http.DefaultTransport.RoundTrip(r)
}

func keyedConnect(t *testing.T, url, key string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: keyTransport(key)}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// raw sends one request to url as key, in session id.
func raw(t *testing.T, method, url, key, id, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("X-Test-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if id != "" {
		req.Header.Set(sessionHeader, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // a GET stream stops at the deadline
	return resp.StatusCode, string(b)
}

// A session of /mcp/servers/NAME belongs to the key that opened it: presented with another key
// (another tenant's), or on another server, it is not found, for POST, GET and DELETE alike,
// and the session goes on for its owner.
func TestSessionBoundToKey(t *testing.T) {
	m, err := Open(Options{Dir: t.TempDir(), Spawn: fakeSpawn(resourceServer), Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, n := range []string{"res", "other"} {
		if err := m.Add(Server{Name: n, Image: "fake", Command: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	srv := keyedServer(t, m)
	url := srv.URL + "/mcp/servers/res"
	cs, err := keyedConnect(t, url, "tenant-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := cs.ID()
	if id == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	list := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	for _, c := range []struct{ method, url, key, body string }{
		{"POST", url, "tenant-b", list},
		{"GET", url, "tenant-b", ""},
		{"DELETE", url, "tenant-b", ""},
		{"POST", url, "", list},
		{"POST", srv.URL + "/mcp/servers/other", "tenant-a", list},
	} {
		code, body := raw(t, c.method, c.url, c.key, id, c.body)
		if code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) || strings.Contains(body, "noop") {
			t.Errorf("%s %s with key %q: %d %s", c.method, c.url, c.key, code, body)
		}
	}
	if code, body := raw(t, "POST", url, "tenant-a", id, list); code != http.StatusOK || !strings.Contains(body, "noop") {
		t.Errorf("the owner's own session: %d %s", code, body)
	}
	// A client that makes each POST a whole exchange, in no session, is answered as before.
	if code, body := raw(t, "POST", url, "tenant-b", "", list); code != http.StatusOK || !strings.Contains(body, "noop") {
		t.Errorf("a request in no session: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("the session after another key's DELETE: %v", err)
	}
}

// Sessions are bounded per key: past the bound a new one is refused, typed (conflict, with what
// to do); ending one (DELETE) makes room.
func TestSessionsBounded(t *testing.T) {
	m, err := Open(Options{Dir: t.TempDir(), Spawn: fakeSpawn(resourceServer), Owner: testOwner, MaxSessionsPerCaller: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Add(Server{Name: "res", Image: "fake", Command: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	url := keyedServer(t, m).URL + "/mcp/servers/res"
	a, err := keyedConnect(t, url, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keyedConnect(t, url, "k", nil); err != nil {
		t.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if code, body := raw(t, "POST", url, "k", "", init); code != http.StatusConflict || !strings.Contains(body, `"conflict"`) || !strings.Contains(body, "DELETE") {
		t.Errorf("a third session: %d %s", code, body)
	}
	if _, err := keyedConnect(t, url, "other-key", nil); err != nil {
		t.Errorf("another key's session: %v", err)
	}
	a.Close()
	if _, err := keyedConnect(t, url, "k", nil); err != nil {
		t.Errorf("a session after one ended: %v", err)
	}
}

// A resource's updates reach only the sessions subscribed to it: the gateway subscribes upstream
// once for the first session and unsubscribes after the last, and what the update carries
// passes DLP redaction.
func TestSubscriptionReachesOnlySubscribers(t *testing.T) {
	var subs, unsubs atomic.Int32
	var hosted atomic.Pointer[mcp.Server]
	fake := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "sub", Version: "1"}, &mcp.ServerOptions{
			SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { subs.Add(1); return nil },
			UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { unsubs.Add(1); return nil },
		})
		for _, u := range []string{"file:///a", "file:///b"} {
			s.AddResource(&mcp.Resource{URI: u, Name: u}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
			})
		}
		mcp.AddTool(s, &mcp.Tool{Name: "touch"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			URI string `json:"uri"`
		}) (*mcp.CallToolResult, any, error) {
			err := hosted.Load().ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI, Meta: mcp.Meta{"note": "key " + awsKey}})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, err
		})
		hosted.Store(s)
		return s
	}
	dir := t.TempDir()
	m, err := Open(Options{Dir: dir, Spawn: fakeSpawn(fake), Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Add(Server{Name: "sub", Image: "fake", Command: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	url := keyedServer(t, m).URL + "/mcp/servers/sub"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type client struct {
		cs  *mcp.ClientSession
		got chan *mcp.ResourceUpdatedNotificationParams
	}
	open := func(key string) client {
		c := client{got: make(chan *mcp.ResourceUpdatedNotificationParams, 8)}
		var err error
		c.cs, err = keyedConnect(t, url, key, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { c.got <- r.Params }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b, c := open("tenant-a"), open("tenant-b"), open("tenant-a")
	if caps := a.cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("subscribe not advertised: %+v", caps.Resources)
	}
	for _, s := range []struct {
		c   client
		uri string
	}{{a, "file:///a"}, {b, "file:///a"}, {c, "file:///b"}} {
		if err := s.c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: s.uri}); err != nil {
			t.Fatal(err)
		}
	}
	// Under protocol 2026-07-28 (the gateway's client session to a Go server) a subscription is
	// a subscriptions/listen stream the server sees open and end on its own time.
	eventually := func(n *atomic.Int32, want int32) int32 {
		for deadline := time.Now().Add(10 * time.Second); n.Load() != want && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			m.prune(ctx)
		}
		return n.Load()
	}
	if n := eventually(&subs, 2); n != 2 {
		t.Errorf("upstream subscriptions for two URIs: %d", n)
	}
	touch := func(uri string) {
		t.Helper()
		if res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": uri}}); err != nil || res.IsError {
			t.Fatalf("touch: %+v %v", res, err)
		}
	}
	expect := func(name string, cl client, uri string) {
		t.Helper()
		select {
		case p := <-cl.got:
			if p.URI != uri {
				t.Errorf("%s: an update of %s, want %s", name, p.URI, uri)
			}
			if note, _ := p.Meta["note"].(string); strings.Contains(note, awsKey) || !strings.Contains(note, "REDACTED") {
				t.Errorf("%s: the update's _meta was not redacted: %q", name, note)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no update of %s", name, uri)
		}
	}
	none := func(name string, cl client) {
		t.Helper()
		select {
		case p := <-cl.got:
			t.Errorf("%s: an update of %s it did not subscribe to", name, p.URI)
		case <-time.After(300 * time.Millisecond):
		}
	}
	touch("file:///a")
	expect("a", a, "file:///a")
	expect("b", b, "file:///a")
	none("c", c)
	if err := b.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "file:///a"}); err != nil {
		t.Fatal(err)
	}
	if n := subs.Load() - unsubs.Load(); n != 2 {
		t.Errorf("upstream subscriptions while a still follows file:///a: %d, want 2", n)
	}
	touch("file:///a")
	expect("a", a, "file:///a")
	none("b", b)
	touch("file:///b")
	expect("c", c, "file:///b")
	none("a", a)
	if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "file:///a"}); err != nil {
		t.Fatal(err)
	}
	if n := eventually(&unsubs, 1); n != 1 {
		t.Errorf("upstream unsubscriptions after the last left: %d", n)
	}
	// A session that ends leaves its subscriptions: the last one's end unsubscribes upstream.
	c.cs.Close()
	if n := eventually(&unsubs, 2); n != 2 {
		t.Errorf("upstream unsubscriptions after the last subscriber ended: %d", n)
	}
	// Each subscription is an audit record, and the updates' secret is in none.
	audit, err := os.ReadFile(dir + "/audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(audit), `"tool":"file:///a","decision":"allow","reason":"resources/subscribe"`); n != 2 || strings.Contains(string(audit), awsKey) {
		t.Errorf("audit: %d subscriptions of file:///a recorded, want 2:\n%s", n, audit)
	}
}
