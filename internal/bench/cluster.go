package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/freeport"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/s3/s3local"
)

// ClusterOptions are the settings of `agentbox bench cluster`.
type ClusterOptions struct {
	// N is the timed rounds of each gateway overhead row (through the gateway and to a node
	// directly, alternating). Default 200.
	N int `json:"n"`
	// Claims is the timed session claims from a warm slot per tier and path. Default 30 (each
	// heavy one waits for a warm sandbox on both nodes: ~1.5 s a round).
	Claims int `json:"claims"`
	// GatewayOnly measures the gateway's rows alone (overhead, placement, claims), without the
	// move and durable rows.
	GatewayOnly bool `json:"gateway_only,omitempty"`
	// Think is how long after the sessions' last step became durable their node is killed (an
	// agent thinking between steps). 0 (the default): at once, the worst case, before another
	// node could fetch the step's snapshot ahead from an S3 store.
	Think time.Duration `json:"think,omitempty"`
	// MovesOnly measures the move rows alone (no gateway or durable rows).
	MovesOnly bool `json:"moves_only,omitempty"`
	// Stores are the shared stores the move rounds run over: "dir", "s3" (when SeaweedFS is
	// built) or both (the default).
	Stores string `json:"stores,omitempty"`
	// Rounds is how many times a node is killed and its sessions moved, half of them through the
	// gateway, half to the adopting node directly. Default 6.
	Rounds int `json:"rounds"`
	// Steps is the heavy steps timed per pattern for the durable checkpoint's cost. Default 10.
	Steps int `json:"steps"`
	// Heavy also measures heavy sessions ("on", "off", or "auto": when this machine runs it).
	Heavy   string    `json:"heavy"`
	DataDir string    `json:"data_dir"`
	JSON    bool      `json:"-"`
	Log     io.Writer `json:"-"`
}

// ClusterResults are the figures of one run.
type ClusterResults struct {
	Started time.Time `json:"started"`
	Host    Host      `json:"host"`
	Load    string    `json:"load"`
	Rounds  int       `json:"rounds"`
	// Move is the session move rows (cluster_move.go).
	Move []MoveRow `json:"move"`
	// Durable is the cost of heavy steps made durable behind their results.
	Durable *DurableRow `json:"durable,omitempty"`
	// N, Gateway and Targets are the gateway's rows (cluster_gateway.go).
	N       int          `json:"n"`
	Gateway []GatewayRow `json:"gateway"`
	Targets []Target     `json:"targets"`
	Failed  int          `json:"failed"`
}

const clusterUsage = `usage: agentbox bench cluster [flags]

Starts two local nodes (this binary's serve --role node, on loopback, sharing the data directory
and a shared directory of the bench's) and a gateway over them (static discovery), and measures,
in the same run:
  - session move time: a node with a nano and a heavy session (pandas loaded) is killed with
    SIGKILL; from then until each session's next run, sent to the gateway, is answered by the
    other node (the gateway finds the node gone and has the other adopt the session), beside the
    same run through the gateway on the live session before the kill; the killed node is started
    again for the next round (not timed); then the same rounds with the nodes sharing a bucket of
    an S3-compatible server (SeaweedFS on loopback, when scripts/cluster/seaweedfs-build.sh has
    built it) instead of a directory;
  - the durable heavy step: how long after its result a heavy step is durable (runsc checkpoint
    --leave-running, pandas loaded), its bytes, and what it adds to runs: back-to-back runs (no
    checkpoint between them), runs after 1.5 s of think time (the checkpoint ran in it), and runs
    that arrive 300 ms after the previous result, while its checkpoint runs (the worst case).
  - the gateway (two more nodes and a gateway in this process, static discovery): a request that
    touches no sandbox and a one-shot nano run through the gateway against the same request to
    the node it chose, alternating; placement itself; a session claimed from a warm slot (create
    and first result) per tier, through the gateway and directly.
Targets: a session moved and answering <= 2 s after its node is gone; gateway overhead <= 1 ms
p50; claim from a warm slot <= 20 ms p99 (issue 18).

flags:
`

func clusterDefaults() ClusterOptions {
	return ClusterOptions{N: 200, Claims: 30, Rounds: 6, Steps: 10, Heavy: "auto", DataDir: config.DefaultDataDir(), Log: os.Stderr}
}

func mainCluster(ctx context.Context, args []string, out io.Writer) error {
	d := clusterDefaults()
	var o ClusterOptions
	fs := newFlagSet("cluster", clusterUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed rounds of each gateway overhead row")
	fs.IntVar(&o.Claims, "claims", d.Claims, "timed session claims per tier and path")
	fs.IntVar(&o.Rounds, "rounds", d.Rounds, "nodes killed (sessions moved)")
	fs.IntVar(&o.Steps, "steps", d.Steps, "heavy steps timed per pattern for the durable checkpoint")
	fs.StringVar(&o.Heavy, "heavy", d.Heavy, "measure heavy sessions too: on, off or auto")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "the data directory with the runtimes' artifacts")
	fs.BoolVar(&o.GatewayOnly, "gateway-only", false, "measure the gateway's rows only (no move or durable rows)")
	fs.DurationVar(&o.Think, "think", 0, "time between the sessions' last durable step and their node's kill")
	fs.BoolVar(&o.MovesOnly, "moves-only", false, "measure the move rows only (no gateway or durable rows)")
	fs.StringVar(&o.Stores, "stores", "dir,s3", "the shared stores the moves run over: dir, s3 or dir,s3")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench cluster: unexpected arguments %q", fs.Args())
	}
	if o.Rounds < 1 || o.Steps < 1 || o.N < 1 || o.Claims < 1 {
		return fmt.Errorf("bench cluster: -n, -claims, -rounds and -steps must be at least 1")
	}
	res, err := RunCluster(ctx, o)
	if err != nil {
		return err
	}
	return emit(ctx, out, "cluster", o.JSON, res, writeClusterReport, res.Failed)
}

// cluster is the bench's nodes: processes of this binary, sharing dirs.
type benchCluster struct {
	exe, data, shared, config, key, token string
	// store, when set, replaces shared (--store s3://...); env is the nodes' extra environment
	// (the S3 server and its credentials).
	store    string
	env      []string
	log      io.Writer
	progress func(string, ...any)
	// ports are the nodes' fixed loopback ports: a node started again listens where the
	// gateway's static discovery says it is.
	ports map[string]int
}

// clusterNode is one node process.
type clusterNode struct {
	id, url string
	cmd     *exec.Cmd
	c       *client.Client
	done    chan struct{}
}

// RunCluster starts the nodes and measures.
func RunCluster(ctx context.Context, o ClusterOptions) (*ClusterResults, error) {
	fillDefaults(&o, clusterDefaults())
	progress := func(format string, args ...any) { fmt.Fprintf(o.Log, "bench cluster: "+format+"\n", args...) }
	withHeavy := o.Heavy == "on"
	if o.Heavy == "auto" {
		l := heavy.LayoutFor(o.DataDir)
		if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err == nil {
			withHeavy = true
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "agentbox-bench-cluster-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg := `{"egress": {"enabled": false}, "heavy": {"enabled": "off"}}`
	if withHeavy {
		cfg = `{"egress": {"enabled": false}, "heavy": {"enabled": "on", "warm": 1}}`
	}
	cfgFile := filepath.Join(tmp, "node.json")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cl := &benchCluster{exe: exe, data: o.DataDir, shared: filepath.Join(tmp, "shared"), config: cfgFile,
		key: randomHex(16), token: randomHex(16), log: o.Log, progress: progress, ports: map[string]int{}}
	res := &ClusterResults{Started: time.Now(), Host: thisHost(), Rounds: o.Rounds, N: o.N}
	// The gateway's rows first, on nodes of their own in this process (stopped before the
	// move rounds start theirs).
	if o.MovesOnly {
		// no gateway rows
	} else if res.Gateway, res.Targets, err = measureGateway(ctx, o, withHeavy); err != nil {
		return nil, fmt.Errorf("gateway rows: %w", err)
	}
	for _, r := range res.Gateway {
		res.Failed += r.Failed
	}
	if o.GatewayOnly {
		res.Load = loadAvg()
		return res, ctx.Err()
	}
	ids := []string{"bench" + randomHex(3), "bench" + randomHex(3)}
	var discovery []string
	for _, id := range ids {
		if cl.ports[id], err = freePort(); err != nil {
			return nil, err
		}
		discovery = append(discovery, fmt.Sprintf("%s=http://127.0.0.1:%d", id, cl.ports[id]))
	}
	defer func() {
		for _, id := range ids {
			os.RemoveAll(filepath.Join(o.DataDir, "nodes", id))
		}
	}()
	nodes := make([]*clusterNode, 2)
	for i, id := range ids {
		if nodes[i], err = cl.start(ctx, id); err != nil {
			for _, n := range nodes[:i] {
				n.stop()
			}
			return nil, err
		}
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.stop()
			}
		}
	}()
	gw, err := cl.startProcess(ctx, "gateway", "serve", "--role", "gateway", "--discovery", "static:"+strings.Join(discovery, ","),
		"--listen", "127.0.0.1:0", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	if withHeavy && !o.MovesOnly {
		if res.Durable, err = measureDurable(ctx, nodes[0], o.Steps, progress); err != nil {
			return nil, err
		}
	}
	stores := o.Stores
	if stores == "" {
		stores = "dir,s3"
	}
	if slices.Contains(strings.Split(stores, ","), "dir") {
		if res.Move, res.Failed, err = measureMoves(ctx, cl, nodes, gw, o.Rounds, o.Think, withHeavy); err != nil {
			return nil, err
		}
	}
	// The same moves with the nodes sharing a bucket of an S3-compatible server (SeaweedFS, when
	// scripts/cluster/seaweedfs-build.sh has built it): the nodes start again over it.
	if !slices.Contains(strings.Split(stores, ","), "s3") {
		// not asked for
	} else if weed, ok := s3local.Find(o.DataDir); ok && ctx.Err() == nil {
		rows, failed, err := measureMovesS3(ctx, cl, nodes, gw, weed, o.Rounds, o.Think, withHeavy)
		if err != nil {
			return nil, fmt.Errorf("moves over S3: %w", err)
		}
		res.Move, res.Failed = append(res.Move, rows...), res.Failed+failed
	} else {
		progress("no SeaweedFS built (scripts/cluster/seaweedfs-build.sh): the moves over S3 are left out")
	}
	res.Load = loadAvg()
	return res, ctx.Err()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort is a loopback port free now, below the kernel's ephemeral range (one from port 0
// could be taken by an outgoing connection before the node binds it).
func freePort() (int, error) {
	p, err := freeport.Loopback(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// start runs `agentbox serve --role node` for id on its port and waits until it listens.
func (cl *benchCluster) start(ctx context.Context, id string) (*clusterNode, error) {
	storeArgs := []string{"--shared-dir", cl.shared}
	if cl.store != "" {
		storeArgs = []string{"--store", cl.store}
	}
	return cl.startProcess(ctx, id, append(append([]string{"serve", "--role", "node", "--node-id", id}, storeArgs...),
		"--data-dir", cl.data, "--config", cl.config, "--listen", fmt.Sprintf("127.0.0.1:%d", cl.ports[id]), "--log-level", nodeLogLevel())...)
}

// startProcess runs this binary with args (a node or the gateway) and waits until it listens.
func (cl *benchCluster) startProcess(ctx context.Context, id string, args ...string) (*clusterNode, error) {
	cmd := exec.Command(cl.exe, args...)
	cmd.Env = append(append(os.Environ(), "AGENTBOX_API_KEY="+cl.key, "AGENTBOX_CLUSTER_TOKEN="+cl.token), cl.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node %s: %w", id, err)
	}
	n := &clusterNode{id: id, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }()
	urls := make(chan string, 1)
	var tail bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent {
				tail.WriteString(line + "\n")
			} else {
				fmt.Fprintf(cl.log, "bench cluster: [%s] %s\n", id, line) // its warnings, after the start
			}
			if _, rest, ok := strings.Cut(line, "listening on "); ok && !sent {
				url, _, _ := strings.Cut(rest, " ")
				urls <- url
				sent = true
			}
		}
		if !sent {
			close(urls)
		}
	}()
	select {
	case url, ok := <-urls:
		if !ok {
			return nil, fmt.Errorf("node %s did not start: %s", id, tail.String())
		}
		n.url = url
	case <-time.After(3 * time.Minute):
		n.stop()
		return nil, fmt.Errorf("node %s did not start within 3 minutes", id)
	case <-ctx.Done():
		n.stop()
		return nil, ctx.Err()
	}
	if n.c, err = client.New(n.url, cl.key); err != nil {
		n.stop()
		return nil, err
	}
	if args[1] == "--role" && args[2] == "node" {
		// Measure a warm node: its pools filled, as a node that has run a while is.
		cl.waitWarm(ctx, n)
	}
	cl.progress("%s at %s, ready in %v", id, n.url, time.Since(start).Round(time.Millisecond))
	return n, nil
}

// waitWarm waits (a minute at most) until every tier of the node has warm sandboxes free.
func (cl *benchCluster) waitWarm(ctx context.Context, n *clusterNode) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/v1/node", nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+cl.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var info cluster.NodeInfo
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		warm := err == nil && len(info.Tiers) > 0
		for _, t := range info.Tiers {
			if t.Warm() == 0 {
				warm = false
			}
		}
		if warm {
			return
		}
	}
}

// kill ends the node with SIGKILL, no shutdown at all, and waits for it.
func (n *clusterNode) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// stop ends the node as Ctrl-C would (its sessions are paused for the next start).
func (n *clusterNode) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(60 * time.Second):
		n.kill()
	}
}

// nodePost calls a node's own endpoint with the cluster token.
func (cl *benchCluster) nodePost(ctx context.Context, url, path string, in, out any) error {
	b, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// waitDurableHead waits until the session's head step is durable and returns it.
func waitDurableHead(ctx context.Context, c *client.Client, id string, within time.Duration) (api.Step, error) {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		l, err := c.Steps(ctx, id)
		if err != nil {
			return api.Step{}, err
		}
		for _, st := range l.Steps {
			if st.ID == l.Head && st.Snapshot.State == "durable" {
				return st, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return api.Step{}, errors.New("session " + id + ": its head step was not durable in time")
		}
	}
}

func writeClusterReport(w io.Writer, r *ClusterResults) {
	fmt.Fprintf(w, "# agentbox bench cluster\n\n%s, %d CPUs, %s; load %s; two nodes on loopback, %d rounds\n\n",
		r.Started.UTC().Format(time.RFC3339), r.Host.CPUs, r.Host.Kernel, r.Load, r.Rounds)
	if len(r.Move) > 0 || r.Durable != nil {
		writeMoveReport(w, r)
		fmt.Fprintln(w)
	}
	writeGatewayReport(w, r)
}

// nodeLogLevel is the nodes' log level: warn, or AGENTBOX_BENCH_NODE_LOG (their lines are
// passed on to the bench's progress output).
func nodeLogLevel() string {
	if l := os.Getenv("AGENTBOX_BENCH_NODE_LOG"); l != "" {
		return l
	}
	return "warn"
}
