package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// bencher carries one run of the nano bench: its settings and what it measured so far.
type bencher struct {
	opts Options
	log  io.Writer
	res  *Results

	py    python // the native interpreter, if found
	pyErr error

	snippets []snippet
	compute  map[string]*SnippetResult
}

// RunNano runs every nano scenario and its baselines and writes the report to out. A scenario
// that fails is reported as such and the others still run; the error then says how many failed.
func RunNano(ctx context.Context, o Options, out io.Writer) error {
	o.defaults()
	b := &bencher{opts: o, log: o.Log, res: &Results{Started: time.Now().UTC(), Settings: o, Notes: []string{}}}
	b.machine(ctx)
	if !o.NoCompute {
		var err error
		if b.snippets, err = loadSnippets(); err != nil {
			return err
		}
		b.initCompute()
	}
	// Baselines first, with no daemon running, so nothing competes with them for the CPU. Compute
	// on native python3 always runs: the nano slowdown is a ratio of it.
	if !o.SkipBaselines {
		b.baselines(ctx)
	}
	if !o.NoCompute {
		b.computeNative(ctx)
	}
	if !o.SkipBaselines {
		b.pyodide(ctx)
	}
	b.nano(ctx)
	b.finish()

	return emit(ctx, out, "nano", o.JSON, b.res, writeReport, b.res.Failed)
}

func (b *bencher) finish() {
	b.res.Seconds = time.Since(b.res.Started).Seconds()
	b.res.Machine.LoadAfter = loadAvg()
	b.res.fillRatios()
	fillDensityRatios(b.res.Density)
	if b.compute != nil {
		b.res.Compute = b.computeResults()
	}
	b.res.Targets = nanoTargets(b.res)
	for _, r := range b.res.Rows {
		if r.Error != "" {
			b.res.Failed++
		}
	}
	for _, d := range b.res.Density {
		if d.Error != "" {
			b.res.Failed++
		}
	}
	if c := b.res.Compute; c != nil {
		for _, s := range c.Snippets {
			b.res.Failed += len(s.Errors)
		}
	}
}

func (b *bencher) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

func (b *bencher) note(format string, args ...any) {
	b.res.addNote(format, args...)
}

// latency measures a sequential scenario and adds its row.
func (b *bencher) latency(ctx context.Context, key, name, detail string, c call) {
	lat, err := sequential(ctx, b.opts.N, c)
	b.add(groupLatency, key, name, detail, lat, 0, err)
}

// throughput measures a concurrent scenario and adds its row.
func (b *bencher) throughput(ctx context.Context, key, name, detail string, c call) {
	lat, wall, err := concurrent(ctx, b.opts.Concurrency, b.opts.N, c)
	b.add(groupThroughput, key, name, detail, lat, wall, err)
}

func (b *bencher) add(group, key, name, detail string, lat []time.Duration, wall time.Duration, err error) {
	row := Row{Group: group, Key: key, Name: name, Detail: detail}
	if err != nil {
		row.Error = err.Error()
		b.progress("%s: FAILED: %v", name, err)
	} else {
		s := Summarize(lat, wall)
		row.Stats = &s
		b.progress("%s (%s): median %.2f ms, p99 %.2f ms, %.1f runs/s", name, group, s.Median, s.P99, s.PerSecond)
	}
	b.res.Rows = append(b.res.Rows, row)
}

// setDetail replaces the detail of the last row added, unless it failed.
func (b *bencher) setDetail(detail string) {
	if n := len(b.res.Rows); n > 0 && b.res.Rows[n-1].Error == "" {
		b.res.Rows[n-1].Detail = detail
	}
}

// fail adds a row for a scenario that could not run.
func (b *bencher) fail(group, key, name string, err error) {
	b.add(group, key, name, "", nil, 0, err)
}

// machine records where the figures come from and finds the native interpreter.
func (b *bencher) machine(ctx context.Context) {
	m := &b.res.Machine
	m.CPUs = runtime.NumCPU()
	m.Go = runtime.Version()
	m.LoadBefore = loadAvg()
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(k))
	}
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
