package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Two nodes share one data directory on one machine, as the cluster tests run them: each starts
// (no lock of the other's in its way), names its sessions, keeps its state under
// DATA_DIR/nodes/ID, and reports itself at GET /v1/node to the cluster token.
func TestNodesShareADataDir(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	start := func(id string) (*sandbox.Audited, config.Config) {
		cfg := config.Default()
		cfg.DataDir = data
		cfg.Cluster = config.ClusterConfig{Role: config.RoleNode, NodeID: id, SharedDir: filepath.Join(data, "shared"), Token: "tok"}
		fake := runtimetest.NewFake(sandbox.Capabilities{Tier: "toy", Sessions: true})
		spec := tierSpec{"toy", func(context.Context, wiring) (sandbox.Runtime, error) { return fake, nil }}
		m, err := newManager(ctx, cfg, log, []tierSpec{spec})
		if err != nil {
			t.Fatalf("node %s: %v", id, err)
		}
		t.Cleanup(func() { m.Close() })
		return m, cfg
	}
	var wg sync.WaitGroup
	ms, cfgs := make([]*sandbox.Audited, 2), make([]config.Config, 2)
	for i, id := range []string{"n1", "n2"} {
		wg.Add(1)
		go func() { defer wg.Done(); ms[i], cfgs[i] = start(id) }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, id := range []string{"n1", "n2"} {
		info, err := ms[i].CreateSession(ctx, sandbox.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node, ok := cluster.NodeOfSession(info.ID); !ok || node != id {
			t.Errorf("node %s made session %s, which names node %q", id, info.ID, node)
		}
		for _, sub := range []string{"sessions/lock", "audit/audit.jsonl"} {
			if _, err := os.Stat(filepath.Join(data, "nodes", id, sub)); err != nil {
				t.Errorf("node %s: %v", id, err)
			}
		}
		// Its sessions' records are in the shared store, where another node can adopt them.
		if _, err := os.Stat(filepath.Join(data, "shared", "records", info.ID)); err != nil {
			t.Errorf("node %s: session %s has no shared record: %v", id, info.ID, err)
		}
		doors, err := NewFrontDoors(ms[i], FrontDoorOptions{APIKey: "boot", Logger: log, Node: NodeOptionsOf(cfgs[i], nil)})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/node", nil)
		req.Header.Set("Authorization", "Bearer tok")
		doors.ServeHTTP(rec, req)
		var ni cluster.NodeInfo
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &ni) != nil {
			t.Fatalf("GET /v1/node: %d %s", rec.Code, rec.Body)
		}
		if ni.ID != id || ni.Sessions != 1 || ni.Tiers["toy"].Sessions != 1 || ni.Tiers["toy"].MaxSessions != 32 || ni.AuditKey == "" {
			t.Errorf("node info %+v", ni)
		}
		// The session's create record is proved at once (a checkpoint is signed for it), and the
		// proof verifies with the key the node reports.
		rec = httptest.NewRecorder()
		req = httptest.NewRequest("GET", "/v1/node/audit/proof?seq=0", nil)
		req.Header.Set("Authorization", "Bearer tok")
		doors.ServeHTTP(rec, req)
		var p audit.Proof
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
			t.Fatalf("GET /v1/node/audit/proof: %d %s", rec.Code, rec.Body)
		}
		if err := p.Verify(ni.AuditKey); err != nil || !strings.Contains(p.Record, info.ID) {
			t.Errorf("proof of record 0 (%s): %v", p.Record, err)
		}
		rec = httptest.NewRecorder()
		req = httptest.NewRequest("GET", "/v1/node/audit/proof?seq=99", nil)
		req.Header.Set("Authorization", "Bearer tok")
		doors.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("proof of a record the log does not have: %d %s", rec.Code, rec.Body)
		}
	}
	// The egress CA both created at once is one CA: a sandbox moved between them keeps trusting it.
	g1, ok1 := ms[0].Egress().(*gateway)
	g2, ok2 := ms[1].Egress().(*gateway)
	if !ok1 || !ok2 || len(g1.CA()) == 0 || string(g1.CA()) != string(g2.CA()) {
		t.Errorf("the two nodes' egress CAs differ")
	}
}

// A single machine keeps its ids and its state where they were.
func TestSingleMachineUnchanged(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	fake := runtimetest.NewFake(sandbox.Capabilities{Tier: "toy", Sessions: true})
	m, err := newManager(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)),
		[]tierSpec{{"toy", func(context.Context, wiring) (sandbox.Runtime, error) { return fake, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.CreateSession(context.Background(), sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cluster.NodeOfSession(info.ID); ok || !strings.HasPrefix(info.ID, "sb_") {
		t.Errorf("a single machine's session id %s names a node", info.ID)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "audit", "audit.jsonl")); err != nil {
		t.Error(err)
	}
	doors, err := NewFrontDoors(m, FrontDoorOptions{APIKey: "boot", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/node", nil)
	req.Header.Set("Authorization", "Bearer boot")
	doors.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /v1/node on a single machine: %d, want the API's 404", rec.Code)
	}
}
