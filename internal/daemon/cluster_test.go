package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// A cluster in this process: nodes (the daemon's own Manager and front doors in node role, over a
// toy tier whose sessions restore, on loopback listeners) sharing a data and a shared directory,
// and the gateway role's front doors before them with static discovery. What is tested through it
// is the wiring of the real packages (gateway, nodeapi, sharedstore, the front doors), not a
// tier; the cluster tests in internal/cli run real node processes with nano and heavy.

const (
	clusterTestKey   = "cluster-test-key-0123456789abcdef"
	clusterTestToken = "cluster-test-token-0123456789"
)

// restorable is the toy tier with sessions that restore (sandbox.Restorer): a restored session is
// a new fake session, so a session that moves keeps what its record says (its tenant, its id),
// not what its sandbox held. That is enough for where requests go and who may make them.
type restorable struct{ *runtimetest.Fake }

func (r restorable) Restore(ctx context.Context, _ string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	return r.NewSession(ctx, opts)
}

// testClusterNode is one node of an in-process cluster.
type testClusterNode struct {
	id  string
	url string
	m   *sandbox.Audited
	srv *httptest.Server
}

// kill makes the node unreachable at once (its listener and connections closed), as a node whose
// process died; its Manager stays in memory, unreachable, until the test ends.
func (n *testClusterNode) kill() { n.srv.Close() }

// testCluster is the in-process cluster: its nodes, the gateway's URL, the keys file.
type testCluster struct {
	nodes []*testClusterNode
	gw    string
	// gwE2B is the gateway's own E2B listener, when it has an E2B domain.
	gwE2B    string
	keysFile string
	shared   *sharedstore.Dir
}

// clusterOpts adapt a node's or the gateway's configuration and front doors.
type clusterOpts struct {
	node    func(cfg *config.Config, o *FrontDoorOptions)
	gateway func(cfg *config.Config, o *FrontDoorOptions)
	// volumes: the toy tier's sessions mount volumes (it binds nothing: the leases are tested).
	volumes bool
}

// startTestCluster starts nodes ids and a gateway before them.
func startTestCluster(t *testing.T, co clusterOpts, ids ...string) *testCluster {
	t.Helper()
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	c := &testCluster{keysFile: filepath.Join(t.TempDir(), auth.KeysFile)}
	sharedDir := filepath.Join(data, "shared")
	var static []string
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String()
		cfg := config.Default()
		cfg.DataDir = data
		cfg.Cluster = config.ClusterConfig{Role: config.RoleNode, NodeID: id, Advertise: url, SharedDir: sharedDir, Token: clusterTestToken}
		fake := runtimetest.NewFake(sandbox.Capabilities{Tier: "toy", Sessions: true, SessionFiles: true, Volumes: co.volumes})
		fake.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
			if req.Output != nil { // a streamed run prints as it goes
				req.Output.Write(sandbox.StreamStdout, []byte(req.Code))
			}
			return &sandbox.Result{Stdout: req.Code}, nil
		}
		spec := tierSpec{"toy", func(context.Context, wiring) (sandbox.Runtime, error) { return restorable{fake}, nil }}
		fo := FrontDoorOptions{APIKey: clusterTestKey, KeysFile: c.keysFile, Logger: log,
			UISharedLogins: filepath.Join(sharedDir, "ui", "logins")} // as serve sets it on a node
		if co.node != nil {
			co.node(&cfg, &fo)
		}
		m, err := newManager(ctx, cfg, log, []tierSpec{spec})
		if err != nil {
			t.Fatalf("node %s: %v", id, err)
		}
		fo.Node = NodeOptionsOf(cfg, ln.Addr())
		doors, err := NewFrontDoors(m, fo)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(doors)
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(func() {
			srv.Close()
			m.Close()
		})
		c.nodes = append(c.nodes, &testClusterNode{id: id, url: url, m: m, srv: srv})
		static = append(static, id+"="+url)
	}
	var err error
	if c.shared, err = sharedstore.OpenDir(sharedDir); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Cluster = config.ClusterConfig{Role: config.RoleGateway, Discovery: "static:" + strings.Join(static, ","), Token: clusterTestToken}
	fo := FrontDoorOptions{APIKey: clusterTestKey, KeysFile: c.keysFile, Logger: log}
	if co.gateway != nil {
		co.gateway(&cfg, &fo)
	}
	gctx, cancel := context.WithCancel(ctx)
	doors, closer, err := NewGatewayDoors(gctx, cfg, fo)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	gsrv := httptest.NewServer(doors)
	var esrv *httptest.Server
	if h := doors.E2BHandler(); h != nil {
		esrv = httptest.NewServer(h) // the gateway's own E2B listener (--e2b-listen)
		c.gwE2B = esrv.URL
	}
	t.Cleanup(func() {
		if esrv != nil {
			esrv.Close()
		}
		gsrv.Close()
		closer.Close()
		cancel()
	})
	c.gw = gsrv.URL
	return c
}

// tenantKey makes a key of tenant in the cluster's keys file (every node and the gateway read it).
func (c *testCluster) tenantKey(t *testing.T, tenant string) string {
	t.Helper()
	key, _ := c.tenantKeyRecord(t, tenant)
	return key
}

// tenantKeyRecord is tenantKey with the key's record.
func (c *testCluster) tenantKeyRecord(t *testing.T, tenant string) (string, auth.KeyRecord) {
	t.Helper()
	key, rec, err := auth.CreateKey(c.keysFile, tenant, "bot", []auth.Scope{auth.ScopeRun, auth.ScopeSessions, auth.ScopeFiles, auth.ScopeAuditRead}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return key, rec
}

// call sends a request to base with key (as a Bearer) and decodes a JSON answer into out.
func call(t *testing.T, base, key, method, path, body string, out any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, resp.Header
}

type apiError struct {
	Error struct{ Code, Message, Hint string }
}

// A session whose node is gone moves only for a caller it belongs to: another tenant's request
// for it through the gateway is not_found, exactly as for a session that does not exist, and
// leaves it where it was (its record's owner and epoch unchanged, no node holding it); its own
// tenant's request then moves it and answers.
func TestGatewayAdoptsOnlyForTheOwner(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t, clusterOpts{}, "na", "nb")
	a, b := c.nodes[0], c.nodes[1]
	owner, stranger := c.tenantKey(t, "acme"), c.tenantKey(t, "umbrella")
	// A session of acme's on node a.
	var s struct{ ID string }
	var st int
	for range 8 { // placement may pick either node; a session on a is what this test needs
		if st, _ = call(t, c.gw, owner, "POST", "/v1/sessions", `{"runtime":"toy"}`, &s); st != 201 {
			t.Fatalf("create: %d", st)
		}
		if node, _ := cluster.NodeOfSession(s.ID); node == a.id {
			break
		}
	}
	if node, _ := cluster.NodeOfSession(s.ID); node != a.id {
		t.Fatalf("no session landed on %s in 8 tries (last %s)", a.id, s.ID)
	}
	ctx := context.Background()
	before, err := c.shared.Get(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	a.kill()

	// The stranger: not_found, as a session that never existed, by every route under the id.
	var e, none apiError
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/" + s.ID + "/run", `{"code":"x"}`},
		{"GET", "/v1/sessions/" + s.ID, ""},
		{"DELETE", "/v1/sessions/" + s.ID, ""},
	} {
		if st, _ = call(t, c.gw, stranger, r.method, r.path, r.body, &e); st != 404 || e.Error.Code != "not_found" {
			t.Errorf("another tenant's %s %s on a dead node: %d %+v, want 404 not_found", r.method, r.path, st, e)
		}
	}
	missing := cluster.SessionPrefix(a.id) + "0123456789abcdef"
	if st, _ = call(t, c.gw, stranger, "POST", "/v1/sessions/"+missing+"/run", `{"code":"x"}`, &none); st != 404 ||
		strings.ReplaceAll(none.Error.Message, missing, "ID") != strings.ReplaceAll(e.Error.Message, s.ID, "ID") {
		t.Errorf("another tenant's session and a missing one answer differently: %d %+v vs %+v", st, none, e)
	}
	after, err := c.shared.Get(ctx, s.ID)
	if err != nil || after.Owner != a.id || after.Epoch != before.Epoch {
		t.Fatalf("after the stranger's requests the record is owned by %s at epoch %d (%v), want %s at %d", after.Owner, after.Epoch, err, a.id, before.Epoch)
	}
	if _, err := b.m.Session(s.ID); err == nil {
		t.Fatalf("node %s holds the session after another tenant's requests", b.id)
	}

	// The owner: the session moves to b and answers, with the move notice.
	var res struct {
		Stdout string
		Notice *sandbox.Notice
	}
	st, hdr := call(t, c.gw, owner, "POST", "/v1/sessions/"+s.ID+"/run", `{"code":"hello"}`, &res)
	if st != 200 || res.Stdout != "hello" || hdr.Get("Agentbox-Node") != b.id {
		t.Fatalf("the owner's run on a dead node: %d %+v on %q, want 200 on %s", st, res, hdr.Get("Agentbox-Node"), b.id)
	}
	if res.Notice == nil || res.Notice.Kind != sandbox.NoticeSessionMoved || res.Notice.FromNode != a.id || res.Notice.ToNode != b.id {
		t.Errorf("the first answer after the move: notice %+v", res.Notice)
	}
	if after, err = c.shared.Get(ctx, s.ID); err != nil || after.Owner != b.id {
		t.Errorf("after the owner's run the record is owned by %s (%v), want %s", after.Owner, err, b.id)
	}
	// And still not the stranger's, on its new node.
	if st, _ = call(t, c.gw, stranger, "GET", "/v1/sessions/"+s.ID, "", &e); st != 404 {
		t.Errorf("another tenant's read after the move: %d", st)
	}
}

// A cluster's volume and the session holding it: made through the gateway, the volume is the
// cluster's (either node mounts it); its read-write lease is the session's across nodes (a second
// writer is a conflict on both), and when the session's node dies and the session moves, it takes
// its lease again on its new node; once it is closed the volume is free everywhere. Another
// tenant sees none of it through the gateway, and cannot mount it on any node.
func TestClusterVolumeLeaseMovesWithItsSession(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "mkfs.ext4")
	c := startTestCluster(t, clusterOpts{volumes: true}, "na", "nb")
	a, b := c.nodes[0], c.nodes[1]
	owner, stranger := c.tenantKey(t, "acme"), c.tenantKey(t, "umbrella")
	if st, _ := call(t, c.gw, owner, "POST", "/v1/volumes", `{"name":"data","quota_bytes":4194304}`, nil); st != 201 && st != 200 {
		t.Fatalf("create a volume through the gateway: %d", st)
	}
	withVol := `{"runtime":"toy","volumes":{"data":"/mnt/data"}}`
	var s struct{ ID string }
	// A session on node a, holding the volume read-write.
	if st, _ := call(t, a.url, owner, "POST", "/v1/sessions", withVol, &s); st != 201 {
		t.Fatalf("create on %s: %d", a.id, st)
	}
	var e apiError
	for _, n := range c.nodes {
		if st, _ := call(t, n.url, owner, "POST", "/v1/sessions", withVol, &e); st != 409 || e.Error.Code != "conflict" {
			t.Errorf("a second writer on %s: %d %+v", n.id, st, e)
		}
		if st, _ := call(t, n.url, stranger, "POST", "/v1/sessions", `{"runtime":"toy","volumes":{"data":"/mnt/data:ro"}}`, &e); st != 404 || e.Error.Code != "not_found" {
			t.Errorf("another tenant mounting it on %s: %d %+v", n.id, st, e)
		}
	}
	var list struct{ Volumes []struct{ Name string } }
	if st, _ := call(t, c.gw, stranger, "GET", "/v1/volumes", "", &list); st != 200 || len(list.Volumes) != 0 {
		t.Errorf("another tenant's volumes through the gateway: %d %+v", st, list)
	}
	if st, _ := call(t, c.gw, stranger, "GET", "/v1/volumes/data", "", &e); st != 404 {
		t.Errorf("another tenant's volume through the gateway: %d", st)
	}

	// Node a dies; the session's next run (through the gateway) moves it to b, with its lease.
	a.kill()
	var res struct{ Stdout string }
	if st, hdr := call(t, c.gw, owner, "POST", "/v1/sessions/"+s.ID+"/run", `{"code":"after the move"}`, &res); st != 200 || hdr.Get("Agentbox-Node") != b.id {
		t.Fatalf("the run after the move: %d on %q", st, hdr.Get("Agentbox-Node"))
	}
	if st, _ := call(t, b.url, owner, "POST", "/v1/sessions", withVol, &e); st != 409 {
		t.Errorf("a second writer on %s after the move: %d %+v", b.id, st, e)
	}
	var v struct {
		MountedRW int `json:"mounted_rw"`
	}
	if st, _ := call(t, c.gw, owner, "GET", "/v1/volumes/data", "", &v); st != 200 || v.MountedRW != 1 {
		t.Errorf("the volume after the move: %d %+v", st, v)
	}
	rec, err := c.shared.Volumes().List(context.Background())
	if err != nil || len(rec) != 1 || rec[0].Owner != b.id {
		t.Fatalf("the volume's record after the move: %+v %v", rec, err)
	}
	// Closed: free for the next writer, on either node.
	if st, _ := call(t, c.gw, owner, "DELETE", "/v1/sessions/"+s.ID, "", nil); st != 200 && st != 204 {
		t.Fatalf("close: %d", st)
	}
	var s2 struct{ ID string }
	if st, _ := call(t, c.gw, owner, "POST", "/v1/sessions", withVol, &s2); st != 201 {
		t.Fatalf("the next writer: %d", st)
	}
}
