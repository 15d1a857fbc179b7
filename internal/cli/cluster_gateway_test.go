package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
)

// The gateway role end to end (issue 18): two real node processes share the data directory's
// artifacts, and `agentbox serve --role gateway` (this process) with static discovery is the
// only address clients use. Runs spread over both nodes, sessions stay on the node their id
// names, streams come through as the code prints, files, commands and audit (with a verified
// inclusion proof) work through it, another tenant's session is not found through it as on a
// node, and a session whose node is killed moves to the other at its next request.
func TestGatewayOverTwoNodes(t *testing.T) {
	requireTiers(t)
	sa, sb := clusterSpecs(t, true)
	// One keys file for the nodes and the gateway, with a tenant key of another tenant.
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	otherKey, _, err := auth.CreateKey(keysFile, "other", "bot", []auth.Scope{auth.ScopeRun, auth.ScopeSessions, auth.ScopeFiles, auth.ScopeAuditRead}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "node.json")
	cfg := fmt.Sprintf(`{"keys_file": %q, "egress": {"enabled": false}, "nano": {"workers": 2}, "heavy": {"enabled": "on", "warm": 1}}`, keysFile)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	sa.Config, sb.Config = cfgFile, cfgFile
	var a, b *testNode
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = startNode(t, sa) }()
	go func() { defer wg.Done(); b = startNode(t, sb) }()
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}

	// The gateway: the real serve command, its key and token from the environment as a job's.
	t.Setenv("AGENTBOX_API_KEY", clusterKey)
	t.Setenv("AGENTBOX_CLUSTER_TOKEN", clusterToken)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		served <- cli.Serve(ctx, cli.ServeOptions{ConfigFile: cfgFile, Listen: "127.0.0.1:0", DataDir: t.TempDir(), LogLevel: "warn",
			Cluster: config.ClusterConfig{Role: config.RoleGateway, Discovery: "static:" + a.id + "=" + a.url + "," + b.id + "=" + b.url},
			Stderr:  os.Stderr, Ready: func(addr net.Addr) { ready <- "http://" + addr.String() }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	var gw string
	select {
	case gw = <-ready:
	case err := <-served:
		t.Fatalf("gateway did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("gateway did not start within 60s")
	}
	c, err := client.New(gw, clusterKey)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := client.New(gw, otherKey)
	bg := context.Background()

	// One-shot runs, 24 at once: all answer, and both nodes ran some.
	landed := map[string]int{}
	var mu sync.Mutex
	var runs sync.WaitGroup
	for i := range 24 {
		runs.Add(1)
		go func() {
			defer runs.Done()
			node, out, err := rawRun(gw, fmt.Sprintf(`{"code":"print(%d * 2)","runtime":"nano"}`, i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !strings.Contains(out, fmt.Sprintf(`"stdout":"%d\n"`, i*2)) {
				t.Errorf("run %d: %v %s", i, err, out)
			}
			landed[node]++
		}()
	}
	runs.Wait()
	if landed[a.id] == 0 || landed[b.id] == 0 {
		t.Errorf("24 runs landed %v, want some on each of %s and %s", landed, a.id, b.id)
	}

	// Sessions: placed on both nodes; each stays on the node its id names (its variables).
	nodes := map[string]string{}
	var ids []string
	for range 4 {
		s, err := c.CreateSession(bg, api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		node, ok := cluster.NodeOfSession(s.ID)
		if !ok {
			t.Fatalf("session %s names no node", s.ID)
		}
		nodes[s.ID] = node
		ids = append(ids, s.ID)
		mustRun(t, c, s.ID, "x = 1")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[nodes[id]] = true
		for range 3 {
			mustRun(t, c, id, "x += 1")
		}
		if r := mustRun(t, c, id, "print(x)"); r.Stdout != "4\n" {
			t.Errorf("session %s through the gateway: x = %q, want 4 (its runs stayed on %s)", id, r.Stdout, nodes[id])
		}
	}
	if !seen[a.id] || !seen[b.id] {
		t.Errorf("4 new sessions went to %v, want both nodes", seen)
	}
	list, err := c.ListSessions(bg)
	if err != nil || len(list) < 4 {
		t.Errorf("sessions through the gateway: %d, %v", len(list), err)
	}

	// An MCP client's tool call on a session reaches the session's node through /mcp.
	for _, id := range ids {
		call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"session_run","arguments":{"session_id":"` + id + `","code":"print(x * 10)"}}}`
		req, _ := http.NewRequest(http.MethodPost, gw+"/mcp", strings.NewReader(call))
		req.Header.Set("Authorization", "Bearer "+clusterKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(out), `stdout:\n40\n`) || resp.Header.Get("Agentbox-Node") != nodes[id] {
			t.Errorf("session_run on %s through /mcp: %d on %q: %.300s", id, resp.StatusCode, resp.Header.Get("Agentbox-Node"), out)
		}
	}

	// Another tenant's key: the session is not found through the gateway, as on its node, and
	// the tenant's list does not hold it.
	if _, err := other.RunInSession(bg, ids[0], api.RunRequest{Code: "print(x)"}); !isCode(err, api.CodeNotFound) {
		t.Errorf("another tenant's run in %s: %v, want not_found", ids[0], err)
	}
	if _, err := other.ReadFile(bg, ids[0], "a.txt"); !isCode(err, api.CodeNotFound) {
		t.Errorf("another tenant's file read: %v, want not_found", err)
	}
	if theirs, err := other.ListSessions(bg); err != nil || len(theirs) != 0 {
		t.Errorf("another tenant's list: %d sessions, %v", len(theirs), err)
	}

	// Volumes through the gateway are the cluster's: made through it, seen and written on
	// either node; another tenant finds nothing of them through the gateway or any node, nor
	// mounts them.
	if _, err := c.CreateVolume(bg, "gv", 4<<20); err != nil {
		t.Fatalf("a volume through the gateway: %v", err)
	}
	if err := c.WriteVolumeFile(bg, "gv", "a.txt", []byte("through the gateway")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, b} {
		if got, err := n.c.ReadVolumeFile(bg, "gv", "a.txt"); err != nil || string(got) != "through the gateway" {
			t.Errorf("node %s reads the gateway's volume: %q %v", n.id, got, err)
		}
		oc, _ := client.New(n.url, otherKey)
		if vs, err := oc.Volumes(bg); err != nil || len(vs) != 0 {
			t.Errorf("another tenant's volumes on node %s: %+v %v", n.id, vs, err)
		}
		if _, err := oc.ReadVolumeFile(bg, "gv", "a.txt"); !isCode(err, api.CodeNotFound) {
			t.Errorf("another tenant's volume read on node %s: %v, want not_found", n.id, err)
		}
		if _, err := oc.CreateSession(bg, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"gv": "/mnt/gv:ro"}}); !isCode(err, api.CodeNotFound) {
			t.Errorf("another tenant mounting the volume on node %s: %v, want not_found", n.id, err)
		}
	}
	if _, err := other.Volume(bg, "gv"); !isCode(err, api.CodeNotFound) {
		t.Errorf("another tenant's volume through the gateway: %v, want not_found", err)
	}
	if err := other.DeleteVolume(bg, "gv"); !isCode(err, api.CodeNotFound) {
		t.Errorf("another tenant's delete through the gateway: %v, want not_found", err)
	}
	if vs, err := c.Volumes(bg); err != nil || len(vs) != 1 || vs[0].Name != "gv" {
		t.Errorf("the volumes through the gateway: %+v %v", vs, err)
	}
	if err := c.DeleteVolume(bg, "gv"); err != nil {
		t.Errorf("delete through the gateway: %v", err)
	}

	// A stream comes through as the code prints: the first line before the run ends.
	var firstAt, doneAt time.Time
	start := time.Now()
	res, err := c.RunStream(bg, api.RunRequest{Code: "import time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')", Runtime: "nano", Timeout: 30},
		func(ev api.StreamEvent) {
			if ev.Type == api.EventStdout && firstAt.IsZero() {
				firstAt = time.Now()
			}
		})
	doneAt = time.Now()
	if err != nil || res.Stdout != "a\nb\n" || firstAt.IsZero() || doneAt.Sub(firstAt) < 500*time.Millisecond {
		t.Errorf("stream through the gateway: %v %+v; first line after %v, result after %v", err, res, firstAt.Sub(start), doneAt.Sub(start))
	}

	// A heavy session through the gateway: pandas, files, a command.
	hs, err := c.CreateSession(bg, api.CreateSessionRequest{Runtime: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(bg, hs.ID, "in.csv", []byte("a,b\n1,2\n3,4\n")); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, c, hs.ID, "import pandas as pd\nprint(pd.read_csv('in.csv').b.sum())"); r.Stdout != "6\n" {
		t.Errorf("heavy session through the gateway: %q", r.Stdout)
	}
	if cmd, err := c.RunCommand(bg, hs.ID, api.CommandRequest{Cmd: "wc -l < in.csv"}); err != nil || strings.TrimSpace(cmd.Stdout) != "3" {
		t.Errorf("a command through the gateway: %+v %v", cmd, err)
	}
	if got, err := c.ReadFile(bg, hs.ID, "in.csv"); err != nil || !strings.HasPrefix(string(got), "a,b") {
		t.Errorf("a file read through the gateway: %q %v", got, err)
	}

	// Audit across both nodes, each record naming its node; the proof of one verified by the
	// gateway.
	recs := auditThrough(t, gw, clusterKey)
	byNode := map[string]int{}
	for _, r := range recs {
		byNode[r.Node]++
	}
	if byNode[a.id] == 0 || byNode[b.id] == 0 {
		t.Errorf("audit records by node: %v", byNode)
	}
	last := recs[len(recs)-1]
	var proof struct {
		Verified bool   `json:"verified"`
		Record   string `json:"record"`
	}
	if code := getJSON(t, gw, clusterKey, fmt.Sprintf("/v1/audit/proof?node=%s&seq=%d", last.Node, last.Seq), &proof); code != 200 || !proof.Verified ||
		!strings.Contains(proof.Record, fmt.Sprintf(`"seq":%d,`, last.Seq)) {
		t.Errorf("proof of %s/%d: %d %+v", last.Node, last.Seq, code, proof)
	}

	// Node a is killed: its session's next request through the gateway is answered by node b,
	// which adopted it at its latest durable step, with the move notice.
	var onA string
	for _, id := range ids {
		if nodes[id] == a.id {
			onA = id
			break
		}
	}
	waitDurableHead(t, c, onA)
	a.kill(t)
	r, err := c.RunInSession(bg, onA, api.RunRequest{Code: "print(x)", Timeout: 60})
	if err != nil {
		t.Fatalf("the session of the killed node through the gateway: %v", err)
	}
	if r.Stdout != "4\n" || r.Notice == nil || r.Notice.Kind != api.NoticeSessionMoved || r.Notice.FromNode != a.id || r.Notice.ToNode != b.id {
		t.Fatalf("after the move: %q, notice %+v", r.Stdout, r.Notice)
	}
	if r := mustRun(t, c, onA, "print(x + 1)"); r.Stdout != "5\n" || r.Notice != nil {
		t.Errorf("the run after: %q, notice %+v", r.Stdout, r.Notice)
	}
	// New work goes to the node that is left.
	if node, _, err := rawRun(gw, `{"code":"print(1)","runtime":"nano"}`); err != nil || node != b.id {
		t.Errorf("a run with node a gone: on %q, %v", node, err)
	}
}

// rawRun posts a run to the gateway and returns the node that answered (Agentbox-Node).
func rawRun(gw, body string) (node, out string, err error) {
	req, _ := http.NewRequest(http.MethodPost, gw+"/v1/run", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clusterKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("Agentbox-Node"), string(b), nil
}

type nodeRecord struct {
	Node string `json:"node"`
	Seq  int64  `json:"seq"`
}

func auditThrough(t *testing.T, gw, key string) []nodeRecord {
	t.Helper()
	var out struct{ Records []nodeRecord }
	if code := getJSON(t, gw, key, "/v1/audit?limit=1000", &out); code != 200 || len(out.Records) == 0 {
		t.Fatalf("audit through the gateway: %d, %d records", code, len(out.Records))
	}
	return out.Records
}

func getJSON(t *testing.T, base, key, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	} else {
		t.Logf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// isCode says whether err is an API error of code.
func isCode(err error, code string) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Code == code
}
