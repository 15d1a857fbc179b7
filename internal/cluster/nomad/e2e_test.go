package nomad

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	wire "github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

const namespace = "agentbox"

// TestNomadCluster is the cluster as a person deploys it (deploy/nomad, README's commands) on a
// real Nomad cluster of a server and two clients (scripts/cluster/nomad-local.sh): two agentbox
// nodes (the system job) and a gateway (the service job) finding them through Nomad's service
// API. Through the gateway: 100 concurrent nano runs and 10 heavy sessions, spread over both
// nodes, none lost; then one node's machine dies (its Nomad client and the node, SIGKILL) in the
// middle of its sessions, which the other node resumes with their variables and files from their
// last step, telling the client they moved; their next run works. Then the machine comes back
// and its node takes work again, without taking back the sessions that moved.
func TestNomadCluster(t *testing.T) {
	testenv.RequireRoot(t)
	dataDir := config.DefaultDataDir()
	l := heavy.LayoutFor(dataDir)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	began := time.Now()
	root := moduleRoot(t)
	bin := buildAgentbox(t, root)
	// Made before the cluster, removed after it is down (cleanups run last first).
	shared := mkdirTemp(t, "agentbox-nomad-shared-")
	var nodeIDs []string
	t.Cleanup(func() {
		for _, id := range nodeIDs {
			os.RemoveAll(filepath.Join(dataDir, "nodes", id))
		}
	})
	lc := startLocalCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// The README's two commands.
	key, token := randomHex(t, 24), randomHex(t, 24)
	lc.cli(t, "namespace", "apply", namespace)
	lc.cli(t, "var", "put", "-namespace", namespace, "nomad/jobs", "api_key="+key, "cluster_token="+token)
	gwPort := freePorts(t, 1)[0]
	lc.cli(t, "job", "run", "-detach", "-var", "agentbox="+bin, "-var", "data_dir="+dataDir, "-var", "shared_dir="+shared,
		filepath.Join(root, "deploy/nomad/agentbox-node.nomad.hcl"))
	lc.cli(t, "job", "run", "-detach", "-var", "agentbox="+bin, "-var", "port="+strconv.Itoa(gwPort),
		filepath.Join(root, "deploy/nomad/agentbox-gateway.nomad.hcl"))
	t.Cleanup(func() {
		if t.Failed() {
			for _, job := range [][2]string{{"agentbox-node", "agentbox"}, {"agentbox-gateway", "gateway"}} {
				t.Logf("%s", lc.taskLogs(namespace, job[0], job[1]))
			}
		}
	})
	lc.waitAllocsRunning(t, namespace, "agentbox-node", 2, 3*time.Minute)
	lc.waitAllocsRunning(t, namespace, "agentbox-gateway", 1, 3*time.Minute)

	// The gateway's own view of the nodes is this package's discovery, as here.
	conf := api.DefaultConfig()
	conf.Address, conf.Namespace = lc.addr, namespace
	nc, err := api.NewClient(conf)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := New(ctx, Options{Service: "agentbox-node", Client: nc})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []cluster.Node
	waitFor(t, 3*time.Minute, "two healthy nodes in Nomad", func() bool {
		nodes, err = disc.Nodes(ctx)
		return err == nil && len(nodes) == 2 && nodes[0].Healthy && nodes[1].Healthy
	})
	for _, n := range nodes {
		nodeIDs = append(nodeIDs, n.ID)
	}
	gw := fmt.Sprintf("http://127.0.0.1:%d", gwPort)
	c, err := client.New(gw, key)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the gateway answering and taking both nodes as healthy", func() bool {
		_, err := c.Health(ctx)
		return err == nil && gatewayHealthy(gw, key) == 2
	})
	t.Logf("cluster, nodes %s and gateway ready %s after the test began", strings.Join(nodeIDs, ", "),
		time.Since(began).Round(time.Millisecond))

	t.Run("100 concurrent nano runs spread over both nodes", func(t *testing.T) {
		before := runsByNode(t, gw, key)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.Run(ctx, wire.RunRequest{Code: fmt.Sprintf("print(%d * %d)", i, i), Runtime: wire.RuntimeNano, Timeout: 60})
				switch {
				case err != nil:
					errs <- fmt.Errorf("run %d: %w", i, err)
				case r.Stdout != fmt.Sprintf("%d\n", i*i) || r.ExitCode != 0:
					errs <- fmt.Errorf("run %d: stdout %q, exit %d", i, r.Stdout, r.ExitCode)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		after := runsByNode(t, gw, key)
		total := 0
		for _, id := range nodeIDs {
			n := after[id] - before[id]
			total += n
			if n == 0 {
				t.Errorf("node %s ran none of the 100 runs (before %v, after %v)", id, before, after)
			}
		}
		if total != 100 {
			t.Errorf("the nodes counted %d nano runs, want 100 (before %v, after %v)", total, before, after)
		}
		t.Logf("100 nano runs in %s, per node %v", time.Since(start).Round(time.Millisecond), diff(after, before))
	})
	if t.Failed() {
		return
	}

	// Ten heavy sessions, each with a variable and a file of its own over two steps.
	type heavySession struct {
		i    int
		id   string
		node string
	}
	sessions := make([]heavySession, 10)
	t.Run("10 heavy sessions spread over both nodes", func(t *testing.T) {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, len(sessions))
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := c.CreateSession(ctx, wire.CreateSessionRequest{Runtime: wire.RuntimeHeavy})
				if err != nil {
					errs <- fmt.Errorf("session %d: %w", i, err)
					return
				}
				node, _ := cluster.NodeOfSession(s.ID)
				sessions[i] = heavySession{i: i, id: s.ID, node: node}
				for _, code := range []string{
					fmt.Sprintf("x = %d", i),
					fmt.Sprintf("x += 1000\nopen('/home/user/s.txt', 'w').write('session %d')\nprint(x)", i),
				} {
					r, err := c.RunInSession(ctx, s.ID, wire.RunRequest{Code: code, Timeout: 60})
					if err != nil || r.ExitCode != 0 {
						errs <- fmt.Errorf("session %d (%s): run %q: %v %+v", i, s.ID, code, err, r)
						return
					}
				}
				if err := waitDurableHead(ctx, c, s.ID, 3*time.Minute); err != nil {
					errs <- fmt.Errorf("session %d: %w", i, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		per := map[string]int{}
		for _, s := range sessions {
			per[s.node]++
		}
		for _, id := range nodeIDs {
			if per[id] == 0 {
				t.Errorf("node %s has none of the 10 heavy sessions: %v", id, per)
			}
		}
		t.Logf("10 heavy sessions with two durable steps each in %s, per node %v", time.Since(start).Round(time.Millisecond), per)
	})
	if t.Failed() {
		return
	}

	// The machine of the node holding the first session dies: its Nomad client, then the node
	// and every process it started, with SIGKILL.
	dead := sessions[0].node
	var deadReg *cluster.Node
	for i := range nodes {
		if nodes[i].ID == dead {
			deadReg = &nodes[i]
		}
	}
	regs, _, err := nc.Services().Get("agentbox-node", nil)
	if err != nil {
		t.Fatal(err)
	}
	machine := ""
	for _, r := range regs {
		if n, err := nodeOf(r); err == nil && n.ID == dead {
			machine = lc.nodeName(t, r.NodeID)
		}
	}
	if deadReg == nil || machine == "" {
		t.Fatalf("node %s is not among Nomad's registrations %+v", dead, regs)
	}
	// A node killed with SIGKILL leaves its gVisor sandboxes behind until it starts again (it
	// removes them then): if the test ends before the machine is back, bring it back first.
	machineDown := false
	t.Cleanup(func() {
		if !machineDown {
			return
		}
		if out, err := lc.script("up"); err != nil {
			t.Logf("bringing %s back to clean up: %v\n%s", machine, err, out)
			return
		}
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) && !healthyNode(ctx, disc, dead) {
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Run("a dead node's sessions move to the other with their last step", func(t *testing.T) {
		machineDown = true
		kill9(t, lc.clientPID(t, machine))
		pids := pidsWithEnv("AGENTBOX_NODE_ID=" + dead)
		if len(pids) == 0 {
			t.Fatalf("no process of node %s found", dead)
		}
		for _, pid := range pids {
			kill9(t, pid)
		}
		killed := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, len(sessions))
		var mu sync.Mutex
		var slowest time.Duration
		for _, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code := "x += 1\nprint(x, open('/home/user/s.txt').read())"
				want := fmt.Sprintf("%d session %d\n", s.i+1001, s.i)
				r, err := c.RunInSession(ctx, s.id, wire.RunRequest{Code: code, Timeout: 60})
				if err != nil {
					errs <- fmt.Errorf("session %d (%s, node %s): first run after the kill: %w", s.i, s.id, s.node, err)
					return
				}
				took := time.Since(killed)
				if r.Stdout != want {
					errs <- fmt.Errorf("session %d (%s, node %s): after the kill: stdout %q, want %q (stderr %q)", s.i, s.id, s.node, r.Stdout, want, r.Stderr)
					return
				}
				if s.node == dead {
					if r.Notice == nil || r.Notice.Kind != wire.NoticeSessionMoved || r.Notice.FromNode != dead || r.Notice.ToNode == dead || r.Notice.Step == "" {
						errs <- fmt.Errorf("session %d (%s) moved from %s without a session_moved notice naming both nodes and the step: %+v", s.i, s.id, dead, r.Notice)
						return
					}
					mu.Lock()
					slowest = max(slowest, took)
					mu.Unlock()
				} else if r.Notice != nil {
					errs <- fmt.Errorf("session %d (%s) on the live node %s got a notice: %+v", s.i, s.id, s.node, r.Notice)
					return
				}
				// Its files, read through the files API, and one more run.
				if b, err := c.ReadFile(ctx, s.id, "s.txt"); err != nil || string(b) != fmt.Sprintf("session %d", s.i) {
					errs <- fmt.Errorf("session %d (%s): file s.txt: %q, %v", s.i, s.id, b, err)
					return
				}
				r, err = c.RunInSession(ctx, s.id, wire.RunRequest{Code: "x += 1\nprint(x)", Timeout: 60})
				if err != nil || r.Stdout != fmt.Sprintf("%d\n", s.i+1002) || r.Notice != nil {
					errs <- fmt.Errorf("session %d (%s): the run after: %v %+v", s.i, s.id, err, r)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("node %s (Nomad client %s) killed; its sessions answered on the other node within %s", dead, machine, slowest.Round(time.Millisecond))
		waitFor(t, time.Minute, "Nomad's checks to mark the dead node unhealthy", func() bool {
			ns, err := disc.Nodes(ctx)
			if err != nil {
				return false
			}
			for _, n := range ns {
				if n.ID == dead {
					return !n.Healthy
				}
			}
			return true
		})
	})
	if t.Failed() {
		return
	}

	t.Run("the machine comes back and its node takes work again", func(t *testing.T) {
		start := time.Now()
		if out, err := lc.script("up"); err != nil {
			t.Fatalf("nomad-local.sh up: %v\n%s", err, out)
		}
		waitFor(t, 3*time.Minute, "node "+dead+" healthy again", func() bool { return healthyNode(ctx, disc, dead) })
		machineDown = false
		t.Logf("node %s healthy again %s after its client restarted", dead, time.Since(start).Round(time.Millisecond))
		// The moved sessions stay where they are.
		for _, s := range sessions {
			r, err := c.RunInSession(ctx, s.id, wire.RunRequest{Code: "print(x)", Timeout: 60})
			if err != nil || r.Stdout != fmt.Sprintf("%d\n", s.i+1002) || r.Notice != nil {
				t.Errorf("session %d (%s) after its old node came back: %v %+v", s.i, s.id, err, r)
			}
		}
		for _, s := range sessions {
			if err := c.CloseSession(ctx, s.id); err != nil {
				t.Errorf("close %s: %v", s.id, err)
			}
		}
	})
	t.Logf("TestNomadCluster took %s", time.Since(began).Round(time.Millisecond))
}

// healthyNode says whether discovery lists the node as healthy.
func healthyNode(ctx context.Context, d *Discovery, id string) bool {
	ns, err := d.Nodes(ctx)
	if err != nil {
		return false
	}
	for _, n := range ns {
		if n.ID == id && n.Healthy {
			return true
		}
	}
	return false
}

// gatewayHealthy counts the nodes the gateway takes work to (its agentbox_gateway_node_healthy).
func gatewayHealthy(gw, key string) int {
	n := 0
	for _, line := range metricLines(gw, key, "agentbox_gateway_node_healthy{") {
		if strings.HasSuffix(line, " 1") {
			n++
		}
	}
	return n
}

// metricLines are the gateway's /metrics lines starting with prefix.
func metricLines(gw, key, prefix string) []string {
	req, _ := http.NewRequest(http.MethodGet, gw+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// runsByNode reads the nano runs each node counted, from the gateway's /metrics (which adds each
// node's metrics with a node label).
func runsByNode(t *testing.T, gw, key string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range metricLines(gw, key, "agentbox_runs_total{") {
		if !strings.Contains(line, `runtime="nano"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `node="`)
		node, _, _ := strings.Cut(rest, `"`)
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[node] += int(v)
	}
	return out
}

func diff(a, b map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range a {
		d[k] = v - b[k]
	}
	return d
}

// waitDurableHead waits until the session's head step is durable: what a move resumes from.
func waitDurableHead(ctx context.Context, c *client.Client, id string, within time.Duration) error {
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		l, err := c.Steps(ctx, id)
		if err != nil {
			return err
		}
		for _, st := range l.Steps {
			if st.ID == l.Head && st.Snapshot.State == "durable" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: its head step %s was not durable within %s", id, l.Head, within)
		}
	}
}

// buildAgentbox builds cmd/agentbox as scripts/build.sh does, into a temporary directory.
func buildAgentbox(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(mkdirTemp(t, "agentbox-nomad-bin-"), "agentbox")
	start := time.Now()
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/agentbox")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/agentbox: %v\n%s", err, out)
	}
	t.Logf("built agentbox in %s", time.Since(start).Round(time.Millisecond))
	return bin
}

// mkdirTemp is a directory removed when the test ends, readable by the Nomad clients' tasks.
func mkdirTemp(t *testing.T, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
