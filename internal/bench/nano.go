package bench

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// NanoResults is what one run of `agentbox bench nano` measured.
type NanoResults = Report[NanoMachine, NanoOptions, *NanoCompute]

// NanoMachine describes where the nano figures were measured: the host, the baselines'
// interpreters and the CPython WASI build, whose -O0 and -O2 builds differ twofold.
type NanoMachine struct {
	Host
	Python  string `json:"python"`
	Node    string `json:"node"`
	Pyodide string `json:"pyodide"`
	Nano    string `json:"nano"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute averages at the start and
	// the end of the run: other work on a 2-core machine skews every figure.
	LoadBefore string `json:"load_before,omitempty"`
	LoadAfter  string `json:"load_after,omitempty"`
}

// nanoBencher carries one run of the nano bench: its settings, what it measured so far, and
// what its scenarios share (the native interpreter, the compute set).
type nanoBencher struct {
	benchmark[NanoMachine, NanoOptions, *NanoCompute]

	py    python // the native interpreter, if found
	pyErr error

	snippets []snippet
	compute  map[string]*NanoSnippet
	// pyoDriver is the installed Pyodide driver, which the compute table starts a node process
	// of its own on; empty when Pyodide is not installed or the baselines are skipped.
	pyoDriver string
}

func newNanoBencher(o NanoOptions) *nanoBencher {
	return &nanoBencher{benchmark: benchmark[NanoMachine, NanoOptions, *NanoCompute]{
		opts: o, log: o.Log, res: &NanoResults{Started: time.Now().UTC(), Settings: o, Notes: []string{}}}}
}

// RunNano runs every nano scenario and its baselines and writes the report to out. A scenario
// that fails is reported as such and the others still run; the error then says how many failed.
func RunNano(ctx context.Context, o NanoOptions, out io.Writer) error {
	o.defaults()
	b := newNanoBencher(o)
	b.machine(ctx)
	if !o.NoCompute {
		var err error
		if b.snippets, err = loadSnippets(); err != nil {
			return err
		}
		b.initCompute()
	}
	// Baselines first, with no daemon running, so nothing competes with them for the CPU. The
	// compute table runs later, with the warm daemon up, every engine interleaved (native python3
	// always: the nano slowdown is a ratio of it).
	if !o.SkipBaselines {
		b.baselines(ctx)
		b.pyodide(ctx)
	}
	b.nano(ctx)
	b.finish()

	return emit(ctx, out, "nano", o.JSON, b.res, writeNanoReport, b.res.Failed)
}

func (b *nanoBencher) finish() {
	b.res.Seconds = time.Since(b.res.Started).Seconds()
	b.res.Machine.LoadAfter = loadAvg()
	if b.compute != nil {
		b.res.Compute = b.computeResults()
	}
	b.res.finish(nanoTargets)
}

// latency measures a sequential scenario and adds its row.
func (b *nanoBencher) latency(ctx context.Context, key, name, detail string, c call) {
	lat, err := sequential(ctx, b.opts.N, c)
	b.add(groupLatency, key, name, detail, lat, 0, err)
}

// throughput measures a concurrent scenario and adds its row.
func (b *nanoBencher) throughput(ctx context.Context, key, name, detail string, c call) {
	lat, wall, err := concurrent(ctx, b.opts.Concurrency, b.opts.N, c)
	b.add(groupThroughput, key, name, detail, lat, wall, err)
}

func (b *nanoBencher) add(group, key, name, detail string, lat []time.Duration, wall time.Duration, err error) {
	row := Row{Group: group, Key: key, Name: name, Detail: detail}
	if err != nil {
		b.addFailed(row, err)
		return
	}
	s := Summarize(lat, wall)
	row.Stats = &s
	b.progress("%s (%s): median %.2f ms, p99 %.2f ms, %.1f runs/s", name, group, s.Median, s.P99, s.PerSecond)
	b.res.Rows = append(b.res.Rows, row)
}

// setDetail replaces the detail of the last row added, unless it failed.
func (b *nanoBencher) setDetail(detail string) {
	if n := len(b.res.Rows); n > 0 && b.res.Rows[n-1].Error == "" {
		b.res.Rows[n-1].Detail = detail
	}
}

// fail adds a row for a scenario that could not run.
func (b *nanoBencher) fail(group, key, name string, err error) {
	b.addFailed(Row{Group: group, Key: key, Name: name}, err)
}

// machine records where the figures come from and finds the native interpreter.
func (b *nanoBencher) machine(ctx context.Context) {
	m := &b.res.Machine
	m.Host = thisHost()
	m.LoadBefore = loadAvg()
	b.py, b.pyErr = findPython(ctx, b.opts.Python)
	if b.pyErr == nil {
		m.Python = b.py.Version + " (" + b.py.Exe + ")"
	}
	if out, err := exec.CommandContext(ctx, "node", "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	if b.opts.URL != "" {
		m.Nano = "daemon at " + b.opts.URL
	} else {
		m.Nano = describeNano(filepath.Join(b.opts.DataDir, "nano"))
	}
}

// describeNano reads what `agentbox setup` recorded about the installed CPython WASI build.
func describeNano(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return "unknown build in " + dir
	}
	var m struct {
		Source   string `json:"source"`
		Describe string `json:"describe"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return "unknown build in " + dir
	}
	return strings.TrimSpace(m.Source + ": " + m.Describe)
}
