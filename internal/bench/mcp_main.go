package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// `agentbox bench mcp`: what the gateway of the hosted MCP servers adds to a tool call. The
// settings and the report are here, the daemon, the direct server and the calls in
// mcp_scenarios.go.

// MCPOptions are the settings of `agentbox bench mcp`.
type MCPOptions struct {
	// N is the number of timed calls per scenario. Default 200.
	N int `json:"n"`
	// Cold is the number of cold starts measured. Default 3; the flag's 0 skips them.
	Cold int `json:"cold"`
	// NoCold skips the cold starts.
	NoCold bool `json:"no_cold,omitempty"`
	// DataDir is the data directory whose heavy runtime, node-mcp image and nano artifacts the
	// daemon uses.
	DataDir string `json:"data_dir"`
	// Node runs server-everything directly; default Node 22 from scripts/mcp-tools.sh's cache
	// (.cache/mcp-tools above the working directory), else node on PATH.
	Node string `json:"node"`
	// CPUProfile, when set, is where a CPU profile of the timed rounds is written (the daemon
	// runs in this process, so it holds the gateway's work and the clients').
	CPUProfile string    `json:"-"`
	JSON       bool      `json:"-"`
	Log        io.Writer `json:"-"`
}

// MCPMachine is the machine as the MCP figures depend on it.
type MCPMachine struct {
	Host
	// Node is the version of the node that ran server-everything directly.
	Node string `json:"node,omitempty"`
	// Image is the node-mcp image's hash.
	Image string `json:"image,omitempty"`
	// Load is the load average when the run started.
	Load string `json:"load,omitempty"`
}

// mcpCompute is the compute section `bench mcp` does not have.
type mcpCompute struct{}

func (mcpCompute) failures() int { return 0 }

// MCPReport is the results of one run.
type MCPReport = Report[MCPMachine, MCPOptions, mcpCompute]

// Groups of the MCP report's rows.
const (
	mgCall  = "mcp-call"
	mgSplit = "mcp-split"
	mgCold  = "mcp-cold"
)

const mcpUsage = `usage: agentbox bench mcp [flags]     (as root: it runs gVisor)

What the gateway of the hosted MCP servers adds to a tool call: the p50 and p99 of a call of
server-everything's echo tool on a warm server, four ways in the same run, interleaved (each
round calls every way once, so a load that changes during the run weighs on all alike), each
with one MCP client (the official Go SDK) that initialized once, HTTP on a kept-alive
connection:
  - directly over stdio: the same package (the node-mcp image's files) run on the host by Node,
    no sandbox, no governance, no HTTP: the baseline, since stdio is what the gateway speaks to
    a hosted server;
  - directly over streamable HTTP: the same, with the package's own HTTP transport (Express,
    sessions, SSE answers), for a client that would reach it without agentbox;
  - through /mcp/servers/everything on a daemon started in this process with the heavy tier: the
    server runs in a gVisor sandbox of its own and speaks stdio on host pipes passed into it; every call
    passes the gateway's governance (the pin check, allow and deny lists, DLP of the arguments
    and of the result, prompt scanning, an audit record in the daemon's signed log);
  - through agentbox's own /mcp as everything__echo, the same path behind the namespacing.
The overhead column is the median minus the stdio baseline's: the daemon's HTTP, the gateway and
the sandbox's stdio transport together, not the gateway alone (a hosted server is not reachable
without its sandbox). The split table says where the hosted call's time goes: Manager.Call in
process (measured in the same rounds), the daemon's HTTP and MCP handling (the hosted median
minus Manager.Call's), and, from the gateway's records, the server's round trip over the guest
channel and governance (DLP both ways, prompt scanning, pin and policy checks, audit). Then the cold start of a hosted server (-cold times): registering a new server and its
first tools/list, which starts its sandbox and pins its tools.

Needs root, the heavy runtime and nano's artifacts (agentbox setup), the node-mcp image (agentbox
image build node-mcp) and Node 18 or later (scripts/mcp-tools.sh installs Node 22).

flags:
`

// mcpDefaults are the defaults of MCPOptions, as its flags show them.
func mcpDefaults() MCPOptions {
	return MCPOptions{N: 200, Cold: 3, DataDir: config.Default().DataDir, Log: os.Stderr}
}

func mainMCP(ctx context.Context, args []string, out io.Writer) error {
	var o MCPOptions
	d := mcpDefaults()
	fs := newFlagSet("mcp", mcpUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed calls per scenario")
	fs.IntVar(&o.Cold, "cold", d.Cold, "cold starts measured (0: none)")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data `DIR` with the heavy runtime, the node-mcp image and nano's artifacts")
	fs.StringVar(&o.Node, "node", "", "`NODE` binary that runs server-everything directly (default: Node 22 of .cache/mcp-tools, else node on PATH)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the timed rounds to `FILE` (go tool pprof)")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench mcp: unexpected arguments %q", fs.Args())
	}
	if o.N < 1 {
		return errors.New("bench mcp: -n must be at least 1")
	}
	if o.Cold < 0 {
		return errors.New("bench mcp: -cold must not be negative")
	}
	o.NoCold = o.Cold == 0
	rep, err := RunMCP(ctx, o)
	if err != nil {
		return err
	}
	return emit(ctx, out, "mcp", o.JSON, rep, writeMCPReport, rep.Failed)
}

// RunMCP measures the gateway against the direct server, then the cold starts.
func RunMCP(ctx context.Context, o MCPOptions) (*MCPReport, error) {
	noCold := o.NoCold
	fillDefaults(&o, mcpDefaults())
	if noCold {
		o.Cold = 0
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bench mcp: run it as root: the hosted server runs in gVisor")
	}
	started := time.Now()
	rep := &MCPReport{Started: started, Settings: o, Machine: MCPMachine{Host: thisHost(), Load: loadAvg()}}
	progress := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "%s bench mcp: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	if err := runMCPScenarios(ctx, o, rep, progress); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(started).Seconds()
	rep.finish(mcpGoals)
	return rep, nil
}

// mcpGoals holds the figures against issue 15's targets: ≤ 1 ms p50 added per call on a warm
// server with DLP on, a cold start ≤ 1.5 s.
func mcpGoals(r *MCPReport) []Target {
	var ts []Target
	direct, hosted := r.stats(mgCall, mcpRowStdio), r.stats(mgCall, mcpRowHosted)
	t := Target{Goal: "≤ 1 ms p50 added per call (warm, DLP on)", Figure: mcpRowHosted + " − " + mcpRowStdio}
	if direct != nil && hosted != nil {
		t.Value, t.Unit, t.Measured = hosted.Median-direct.Median, "ms", true
		t.Met = t.Value <= 1
	}
	ts = append(ts, t)
	if r.Settings.Cold > 0 {
		ts = append(ts, latencyTarget("cold start ≤ 1.5 s p50", mcpRowCold, r.stats(mgCold, mcpRowCold), false, 1500))
	}
	return ts
}

// writeMCPReport writes the Markdown report.
func writeMCPReport(w io.Writer, r *MCPReport) {
	over := func(row Row) string {
		b := r.stats(mgCall, mcpRowStdio)
		if b == nil || row.Base {
			return "—"
		}
		d := row.Stats.Median - b.Median
		if d < 0 {
			return "−" + fmtMS(-d)
		}
		return "+" + fmtMS(d)
	}
	l := layout{
		name: "mcp",
		host: r.Machine.Host,
		header: []string{
			fmt.Sprintf("server-everything's echo tool, %d timed calls per scenario after %d untimed, one client each, the scenarios interleaved call by call; direct on %s; node-mcp image %.12s; load average %s",
				r.Settings.N, warmup, orDash(r.Machine.Node), r.Machine.Image, orDash(r.Machine.Load)),
			"overhead and ÷ = against the direct call over stdio, the transport the gateway itself speaks to a hosted server: what remains is the daemon's HTTP, the gateway's governance and the gVisor sandbox's stdio together",
		},
		tables: []table{
			{group: mgCall, title: "Tool call on a warm server", cols: []column{colN, colMedian, colP99, colMin,
				{"overhead p50 ms", over}, colRatio("÷ direct", func(r Row) float64 { return r.Ratio }, fmtRatio)}},
			{group: mgSplit, title: "Where the hosted call's time goes", cols: []column{colN, colMedian, colP99, colMin}},
			{group: mgCold, title: "Cold start of a hosted server", cols: []column{colN, colMedian, colP99, colMin}},
		},
	}
	writeReport(w, r, l)
}
