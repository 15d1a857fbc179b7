package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/s3/s3test"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Sessions that survive their node (issue 18): two real node daemons, each a process of its
// own, share the data directory (the runtimes' artifacts) and a shared directory (sessions'
// records and snapshots). A node is killed with SIGKILL; the other adopts its sessions, which
// answer their next run with their variables and files and a session_moved notice, once.

const nodeHelperEnv = "AGENTBOX_TEST_CLUSTER_NODE" // JSON nodeSpec: makes TestClusterNodeProcess a node

const (
	clusterKey   = "test-cluster-key-0123456789"
	clusterToken = "test-cluster-token-0123456789"
)

type nodeSpec struct {
	ID, Data, Shared, Config string
}

// TestClusterNodeProcess is a node the tests start and kill: `agentbox serve --role node` in a
// process of its own.
func TestClusterNodeProcess(t *testing.T) {
	raw := os.Getenv(nodeHelperEnv)
	if raw == "" {
		t.Skip("a node the cluster tests start and kill")
	}
	var spec nodeSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin) // until killed, or the parent goes away
		cancel()
	}()
	err := cli.Serve(ctx, cli.ServeOptions{
		ConfigFile: spec.Config,
		Listen:     "127.0.0.1:0",
		DataDir:    spec.Data,
		Cluster:    config.ClusterConfig{Role: config.RoleNode, NodeID: spec.ID, SharedDir: spec.Shared},
		LogLevel:   "warn",
		Stderr:     os.Stderr,
		Ready:      func(a net.Addr) { fmt.Println("ready http://" + a.String()) },
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// testNode is a node process of the test.
type testNode struct {
	id, url string
	cmd     *exec.Cmd
	c       *client.Client
}

// startNode starts node id on the shared directories and waits until it serves.
func startNode(t *testing.T, spec nodeSpec) *testNode {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterNodeProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), nodeHelperEnv+"="+string(raw), "AGENTBOX_API_KEY="+clusterKey,
		"AGENTBOX_CLUSTER_TOKEN="+clusterToken, "AGENTBOX_LISTEN=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") || strings.HasPrefix(sc.Text(), "error ") {
				lines <- sc.Text()
				break
			}
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(180 * time.Second):
		t.Fatalf("node %s did not start within 180s", spec.ID)
	}
	url, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		t.Fatalf("node %s: %q", spec.ID, line)
	}
	c, err := client.New(url, clusterKey)
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{id: spec.ID, url: url, cmd: cmd, c: c}
}

// kill ends the node with SIGKILL: no shutdown at all.
func (n *testNode) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}

// nodeCall posts body to a node's own endpoint with the cluster token.
func nodeCall(t *testing.T, url, path string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+clusterToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s%s: %v", url, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, raw)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Logf("POST %s%s: %d %s", url, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

func randomID(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// clusterSpecs are two nodes' specs over the default data directory (where `agentbox setup`
// put the runtimes' artifacts; each node's own state goes under DATA_DIR/nodes/ID, removed at
// the end) and a shared directory of the test's.
func clusterSpecs(t *testing.T, heavyOn bool) (nodeSpec, nodeSpec) {
	t.Helper()
	data := config.DefaultDataDir()
	shared := filepath.Join(t.TempDir(), "shared")
	cfg := `{"egress": {"enabled": false}, "nano": {"workers": 1}, "heavy": {"enabled": "off"}}`
	if heavyOn {
		cfg = `{"egress": {"enabled": false}, "nano": {"workers": 1}, "heavy": {"enabled": "on", "warm": 0}}`
	}
	cfgFile := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := randomID("ta"), randomID("tb")
	t.Cleanup(func() {
		for _, id := range []string{a, b} {
			os.RemoveAll(filepath.Join(data, "nodes", id))
		}
	})
	return nodeSpec{ID: a, Data: data, Shared: shared, Config: cfgFile}, nodeSpec{ID: b, Data: data, Shared: shared, Config: cfgFile}
}

func requireTiers(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	if err := (nano.Artifacts{Dir: nano.Dir(config.Default())}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
}

func mustRun(t *testing.T, c *client.Client, id, code string) *api.Result {
	t.Helper()
	res, err := c.RunInSession(context.Background(), id, api.RunRequest{Code: code, Timeout: 60})
	if err != nil {
		t.Fatalf("run %q in %s: %v", code, id, err)
	}
	if res.Error != nil {
		t.Fatalf("run %q in %s raised %s: %s", code, id, res.Error.Name, res.Error.Value)
	}
	return res
}

// waitDurableHead waits until a session's head step is durable.
func waitDurableHead(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := c.Steps(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range l.Steps {
			if st.ID == l.Head && st.Snapshot.State == "durable" {
				return st.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: head %s not durable after 90s: %+v", id, l.Head, l.Steps)
		}
	}
}

func TestSessionsSurviveNodeKill(t *testing.T) {
	requireTiers(t)
	sa, sb := clusterSpecs(t, true)
	testSessionsSurviveNodeKill(t, sa, sb)
}

// The same over a bucket of a real S3-compatible server (SeaweedFS) instead of a directory:
// records fenced by conditional writes, snapshots (a heavy checkpoint of tens of MB included)
// through each node's cache.
func TestSessionsSurviveNodeKillS3(t *testing.T) {
	requireTiers(t)
	sa, sb := clusterSpecs(t, true)
	s3Specs(t, &sa, &sb)
	testSessionsSurviveNodeKill(t, sa, sb)
}

// s3Specs moves two nodes' shared store into a fresh bucket of the test binary's S3 server.
func s3Specs(t *testing.T, specs ...*nodeSpec) {
	t.Helper()
	srv := s3test.Shared(t)
	c := srv.Bucket(t, "")
	creds := filepath.Join(t.TempDir(), "s3-credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		var cfg map[string]any
		raw, err := os.ReadFile(sp.Config)
		if err == nil {
			err = json.Unmarshal(raw, &cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg["cluster"] = map[string]any{"store": "s3://" + c.Bucket() + "/cluster", "s3": map[string]any{
			"endpoint": srv.Endpoint, "path_style": true, "credentials_file": creds}}
		raw, _ = json.Marshal(cfg)
		sp.Config = filepath.Join(t.TempDir(), "node-s3.json")
		if err := os.WriteFile(sp.Config, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		sp.Shared = ""
	}
}

func testSessionsSurviveNodeKill(t *testing.T, sa, sb nodeSpec) {
	a, b := startNode(t, sa), startNode(t, sb)
	ctx := context.Background()

	// On node a: a nano and a heavy session with variables and files.
	ns, err := a.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	if node, _ := cluster.NodeOfSession(ns.ID); node != a.id {
		t.Fatalf("session %s does not name node %s", ns.ID, a.id)
	}
	mustRun(t, a.c, ns.ID, "x = 7\nopen('/home/user/n.txt', 'w').write('nano file')")
	nanoHead := mustRun(t, a.c, ns.ID, "x += 1").Step
	hs, err := a.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Env: map[string]string{"TOKEN": "tok-77aa88bb99cc00dd"}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, a.c, hs.ID, "y = 41\nopen('/home/user/h.txt', 'w').write('heavy file')")
	heavyHead := mustRun(t, a.c, hs.ID, "y += 1").Step
	if got := waitDurableHead(t, a.c, ns.ID); got != nanoHead {
		t.Fatalf("nano durable head %s, want %s", got, nanoHead)
	}
	if got := waitDurableHead(t, a.c, hs.ID); got != heavyHead {
		t.Fatalf("heavy durable head %s, want %s", got, heavyHead)
	}
	// A heavy session holding a volume read-write, made on node a: the volume is the cluster's
	// (node b lists it, and refuses a second writer), and the session's durable step holds its
	// files (and a file handle open across the move).
	if _, err := a.c.CreateVolume(ctx, "data", 8<<20); err != nil {
		t.Fatal(err)
	}
	vs, err := a.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/mnt/data"}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, a.c, vs.ID, "z = 5\nfh = open('/mnt/data/v.txt', 'w')\nfh.write('volume file'); fh.flush()")
	volHead := mustRun(t, a.c, vs.ID, "z += 1").Step
	if got := waitDurableHead(t, a.c, vs.ID); got != volHead {
		t.Fatalf("volume session's durable head %s, want %s", got, volHead)
	}
	if v, err := b.c.Volume(ctx, "data"); err != nil || v.MountedRW != 1 || v.QuotaBytes != 8<<20 {
		t.Fatalf("node b's view of the volume made on a: %+v %v", v, err)
	}
	if _, err := b.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/mnt/data"}}); err == nil || !strings.Contains(err.Error(), "read-write") {
		t.Fatalf("a second writer on node b: %v", err)
	}

	a.kill(t)
	killed := time.Now()

	// Node b adopts both (as the gateway would ask it to, node a being gone).
	for id, head := range map[string]string{ns.ID: nanoHead, hs.ID: heavyHead} {
		var res cluster.AdoptResult
		if code := nodeCall(t, b.url, "/v1/node/adopt", cluster.AdoptRequest{Session: id}, &res); code != http.StatusOK {
			t.Fatalf("adopt %s: %d", id, code)
		}
		if !res.Adopted || res.Owner != b.id || res.Addr != b.url || res.Step != head {
			t.Fatalf("adopt %s: %+v, want adopted by %s at %s from step %s", id, res, b.id, b.url, head)
		}
	}
	// The nano session's next run: its state, and the notice once.
	res := mustRun(t, b.c, ns.ID, "print(x, open('/home/user/n.txt').read())")
	moved := time.Since(killed)
	if res.Stdout != "8 nano file\n" {
		t.Fatalf("the nano session on node b: %q, want \"8 nano file\"", res.Stdout)
	}
	want := api.Notice{Kind: api.NoticeSessionMoved, FromNode: a.id, ToNode: b.id, Step: nanoHead, Reason: "node " + a.id + " is gone"}
	if res.Notice == nil || *res.Notice != want {
		t.Fatalf("the nano session's notice: %+v, want %+v", res.Notice, want)
	}
	if again := mustRun(t, b.c, ns.ID, "print(x)"); again.Notice != nil || again.Stdout != "8\n" {
		t.Fatalf("the next run: %q, notice %+v", again.Stdout, again.Notice)
	}
	// The heavy session's, streamed: the notice is the first event.
	var events []string
	hres, err := b.c.RunInSessionStream(ctx, hs.ID, api.RunRequest{Code: "print(y, open('/home/user/h.txt').read())", Timeout: 60},
		func(ev api.StreamEvent) { events = append(events, ev.Type) })
	if err != nil {
		t.Fatal(err)
	}
	if hres.Stdout != "42 heavy file\n" {
		t.Fatalf("the heavy session on node b: %q, want \"42 heavy file\"", hres.Stdout)
	}
	if len(events) == 0 || events[0] != api.EventNotice || hres.Notice == nil || hres.Notice.Step != heavyHead || hres.Notice.FromNode != a.id {
		t.Fatalf("the heavy session's stream: events %v, notice %+v", events, hres.Notice)
	}
	if again := mustRun(t, b.c, hs.ID, "y += 1\nprint(y)"); again.Notice != nil || again.Stdout != "43\n" {
		t.Fatalf("the heavy session's next run: %q, notice %+v", again.Stdout, again.Notice)
	}
	t.Logf("node killed → nano session answering on the other node: %v", moved)

	// The session with the volume: its durable step's files are the volume's on node b before
	// the session moves (the files API reads them; the session still holds it read-write), then
	// adopted, its variables and its volume's files (through the handle it had open) on node b.
	if got, err := b.c.ReadVolumeFile(ctx, "data", "v.txt"); err != nil || string(got) != "volume file" {
		t.Fatalf("node b reads the volume of a session on the dead node: %q %v", got, err)
	}
	vstart := time.Now()
	var vres cluster.AdoptResult
	if code := nodeCall(t, b.url, "/v1/node/adopt", cluster.AdoptRequest{Session: vs.ID}, &vres); code != http.StatusOK || !vres.Adopted || vres.Step != volHead {
		t.Fatalf("adopt %s: %d %+v", vs.ID, code, vres)
	}
	if r := mustRun(t, b.c, vs.ID, "fh.write(' and more'); fh.close()\nprint(z, open('/mnt/data/v.txt').read())"); r.Stdout != "6 volume file and more\n" || r.Notice == nil {
		t.Fatalf("the volume session on node b: %q, notice %+v", r.Stdout, r.Notice)
	}
	t.Logf("heavy session with a volume: adopted and answering on the other node in %v", time.Since(vstart))
	// Node b's audit log records the adoption, then the session's runs there.
	recs, err := b.c.Audit(ctx, client.AuditQuery{Session: ns.ID, Kind: "session.adopt"})
	if err != nil || len(recs) != 1 || recs[0].Lifecycle == nil || !strings.Contains(recs[0].Lifecycle.Reason, "adopted from node "+a.id+" at step "+nanoHead) {
		t.Fatalf("node b's audit of the adoption: %+v %v", recs, err)
	}

	// Adopting again is idempotent; node a, started again, does not take its old sessions back
	// (they are node b's now) and, asked to adopt one, names b.
	var res2 cluster.AdoptResult
	if nodeCall(t, b.url, "/v1/node/adopt", cluster.AdoptRequest{Session: ns.ID}, &res2); res2.Adopted || res2.Owner != b.id {
		t.Fatalf("a second adopt on b: %+v", res2)
	}
	a2 := startNode(t, sa)
	if _, err := a2.c.GetSession(ctx, ns.ID); err == nil {
		t.Fatal("node a, back, holds a session node b owns")
	}
	var res3 cluster.AdoptResult
	if nodeCall(t, a2.url, "/v1/node/adopt", cluster.AdoptRequest{Session: hs.ID}, &res3); res3.Adopted || res3.Owner != b.id || res3.Addr != b.url {
		t.Fatalf("adopt on node a while b owns it: %+v", res3)
	}

	// Node b drains: it takes no new sessions, says so, and releases both; node a adopts them at
	// once (no owner to ask), with their state.
	var dr cluster.DrainResult
	if code := nodeCall(t, b.url, "/v1/node/drain", struct{}{}, &dr); code != http.StatusOK || len(dr.Released) != 3 || dr.Failed != "" {
		t.Fatalf("drain: %d %+v", code, dr)
	}
	req, _ := http.NewRequest(http.MethodGet, b.url+"/v1/node", nil)
	req.Header.Set("Authorization", "Bearer "+clusterToken)
	var info cluster.NodeInfo
	if resp, err := http.DefaultClient.Do(req); err != nil || json.NewDecoder(resp.Body).Decode(&info) != nil || !info.Draining {
		t.Fatalf("GET /v1/node of the drained node: %+v %v", info, err)
	}
	if _, err := b.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"}); err == nil || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("a draining node took a new session: %v", err)
	}
	for _, id := range []string{ns.ID, hs.ID, vs.ID} {
		var back cluster.AdoptResult
		if code := nodeCall(t, a2.url, "/v1/node/adopt", cluster.AdoptRequest{Session: id}, &back); code != http.StatusOK || !back.Adopted || back.Owner != a.id {
			t.Fatalf("adopt %s after the drain: %d %+v", id, code, back)
		}
	}
	if r := mustRun(t, a2.c, ns.ID, "print(x)"); r.Stdout != "8\n" || r.Notice == nil || r.Notice.Reason != "node "+b.id+" drained" {
		t.Fatalf("the nano session after the drain: %q, notice %+v", r.Stdout, r.Notice)
	}
	if r := mustRun(t, a2.c, hs.ID, "print(y, open('/home/user/h.txt').read())"); r.Stdout != "43 heavy file\n" || r.Notice == nil {
		t.Fatalf("the heavy session after the drain: %q, notice %+v", r.Stdout, r.Notice)
	}
	if r := mustRun(t, a2.c, vs.ID, "print(z, open('/mnt/data/v.txt').read())"); r.Stdout != "6 volume file and more\n" || r.Notice == nil {
		t.Fatalf("the volume session after the drain: %q, notice %+v", r.Stdout, r.Notice)
	}
	// Closed, its files are the volume's, read on either node.
	if err := a2.c.CloseSession(ctx, vs.ID); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a2, b} {
		if got, err := n.c.ReadVolumeFile(ctx, "data", "v.txt"); err != nil || string(got) != "volume file and more" {
			t.Fatalf("node %s reads the volume: %q %v", n.id, got, err)
		}
	}
}
