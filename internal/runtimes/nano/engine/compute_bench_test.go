package engine

// A side-by-side compute measurement for tuning the nano tier's CPython build and engine
// settings (issue 11 item 6; results in docs/RATIONALE.md, "Nano compute"). It runs the bench's
// nine compute snippets (internal/bench/compute, read from disk) interleaved on native python3,
// on one or more nano builds and, when node and the bench's Pyodide are installed, on Pyodide,
// and prints per snippet the median time inside the snippet and the median CPU time, with the
// geomean ratios to native. CPU time is what a loaded machine distorts least.
//
//	AGENTBOX_COMPUTE_BENCH=1 go test ./internal/runtimes/nano/engine -run TestComputeSideBySide -v -timeout 60m
//
// Knobs: COMPUTE_REPS (default 3), COMPUTE_BUILDS ("name=/path/python.wasm,..."; the stdlib is
// the python311.zip beside each; default: the test build), COMPUTE_SNIPPETS (comma list),
// COMPUTE_PYODIDE=0 skips Pyodide. In the build with guard pages (scripts/wazero-guard.sh) the
// test build also runs compiled with bounds checks ("nano-checked"; COMPUTE_CHECKED=0 leaves it out). Pyodide is the npm package `agentbox bench nano` installs under
// the data directory (bench/pyodide), run by the node on PATH; without it the column is left out.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine/enginetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

type cbSnippet struct{ name, code string }

type cbSample struct{ wall, cpu float64 } // seconds

func cbWrap(s cbSnippet) string {
	lit, _ := json.Marshal(s.code)
	return "import time as _t\n" +
		"_c = compile(" + string(lit) + ", '" + s.name + ".py', 'exec')\n" +
		"_p0 = _t.process_time(); _w0 = _t.perf_counter()\n" +
		"exec(_c, {'__name__': '__main__'})\n" +
		"_w1 = _t.perf_counter(); _p1 = _t.process_time()\n" +
		"print()\nprint('@@T %.9f %.9f' % (_w1 - _w0, _p1 - _p0), flush=True)\n"
}

func cbParse(out string) (wall, cpu float64, body string, err error) {
	k := strings.LastIndex(out, "\n@@T ")
	if k < 0 {
		return 0, 0, "", fmt.Errorf("no timing line in %q", cbTrunc(out))
	}
	f := strings.Fields(out[k+5:])
	if len(f) < 2 {
		return 0, 0, "", fmt.Errorf("bad timing line %q", out[k:])
	}
	wall, _ = strconv.ParseFloat(f[0], 64)
	cpu, _ = strconv.ParseFloat(f[1], 64)
	return wall, cpu, out[:k], nil
}

func cbTrunc(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func cbCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

type cbPyodide struct {
	cmd *exec.Cmd
	in  *json.Encoder
	out *bufio.Scanner
}

func (p *cbPyodide) run(code string) (cbSample, string, error) {
	if err := p.in.Encode(map[string]string{"code": code}); err != nil {
		return cbSample{}, "", err
	}
	if !p.out.Scan() {
		return cbSample{}, "", fmt.Errorf("node ended: %v", p.out.Err())
	}
	var r struct {
		CPUMS         float64 `json:"cpu_ms"`
		Stdout, Error string
	}
	json.Unmarshal(p.out.Bytes(), &r)
	if r.Error != "" {
		return cbSample{}, "", fmt.Errorf("pyodide: %s", cbTrunc(r.Error))
	}
	wall, _, body, err := cbParse("\n" + r.Stdout)
	// Pyodide's process_time is not the process's CPU: take node's CPU over the whole
	// runPython (the wrapper's compile is tiny).
	return cbSample{wall, r.CPUMS / 1000}, body, err
}

func TestComputeSideBySide(t *testing.T) {
	if os.Getenv("AGENTBOX_COMPUTE_BENCH") == "" {
		t.Skip("set AGENTBOX_COMPUTE_BENCH=1 to run the side-by-side compute measurement")
	}
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("COMPUTE_REPS")); err == nil && v > 0 {
		reps = v
	}
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "..", "bench", "compute")
	files, _ := filepath.Glob(filepath.Join(dir, "*.py"))
	sort.Strings(files)
	want := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("COMPUTE_SNIPPETS"), ",") {
		if n != "" {
			want[n] = true
		}
	}
	var snippets []cbSnippet
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".py")
		if len(want) > 0 && !want[name] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		snippets = append(snippets, cbSnippet{name, string(b)})
	}
	if len(snippets) == 0 {
		t.Fatalf("no snippets in %s", dir)
	}

	type build struct {
		name string
		e    *Engine
	}
	var builds []build
	cache := filepath.Join(os.TempDir(), "agentbox-compute-cache")
	if spec := os.Getenv("COMPUTE_BUILDS"); spec != "" {
		for _, kv := range strings.Split(spec, ",") {
			name, wasm, _ := strings.Cut(kv, "=")
			zip := filepath.Join(filepath.Dir(wasm), "python311.zip")
			e, err := New(context.Background(), Config{WasmPath: wasm, StdlibPath: zip, CacheDir: cache, MemoryReserveBytes: 1 << 30})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			t.Logf("%s: loaded in %v", name, e.CompileTime)
			builds = append(builds, build{name, e})
		}
	} else {
		b := enginetest.Find(t)
		e, err := New(context.Background(), Config{WasmPath: b.Wasm, StdlibPath: b.Stdlib, CacheDir: b.Cache, MemoryReserveBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		builds = append(builds, build{"nano", e})
		if GuardPages && os.Getenv("COMPUTE_CHECKED") != "0" {
			// The same module with wazero's bounds checks, as a plain build compiles it: the
			// guard pages' gain in the same run.
			e, err := New(context.Background(), Config{WasmPath: b.Wasm, StdlibPath: b.Stdlib, CacheDir: b.Cache, MemoryReserveBytes: 1 << 30, checked: true})
			if err != nil {
				t.Fatal(err)
			}
			builds = append(builds, build{"nano-checked", e})
		}
	}

	var pyo *cbPyodide
	if script, pkg := cbPyodideDriver(t); script != "" {
		cmd := exec.Command("node", script, pkg)
		cmd.Stderr = os.Stderr
		w, _ := cmd.StdinPipe()
		r, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatalf("start node: %v", err)
		}
		pyo = &cbPyodide{cmd: cmd, in: json.NewEncoder(w), out: bufio.NewScanner(r)}
		pyo.out.Buffer(make([]byte, 1<<20), 64<<20)
		if !pyo.out.Scan() { // the ready line
			t.Fatalf("Pyodide did not start: %v", pyo.out.Err())
		}
		defer func() { w.Close(); cmd.Wait() }()
	}

	engines := []string{"native"}
	for _, b := range builds {
		engines = append(engines, b.name)
	}
	if pyo != nil {
		engines = append(engines, "pyodide")
	}
	samples := map[string]map[string][]cbSample{} // snippet → engine → samples
	for _, s := range snippets {
		samples[s.name] = map[string][]cbSample{}
	}
	nanoRun := func(e *Engine, code string) (cbSample, string, error) {
		runtime.GC()
		inst, err := e.NewInstance(context.Background(), InstanceOptions{})
		if err != nil {
			return cbSample{}, "", err
		}
		defer inst.Close()
		c0 := cbCPU()
		res, err := inst.Run(context.Background(), &Request{Code: code, Limits: sandbox.Limits{Timeout: 5 * time.Minute, MemoryBytes: 512 << 20}})
		c1 := cbCPU()
		if err != nil {
			return cbSample{}, "", err
		}
		if res.Error != nil {
			return cbSample{}, "", fmt.Errorf("%s: %s", res.Error.Name, res.Error.Value)
		}
		wall, _, body, err := cbParse(res.Stdout)
		return cbSample{wall, c1 - c0}, body, err
	}
	// nano's CPU figure is the host process's CPU over the whole Run: calibrate the part that is
	// not the snippet with an empty one.
	nanoOverhead := map[string]float64{}
	for _, b := range builds {
		var o []float64
		for range 5 {
			s, _, err := nanoRun(b.e, cbWrap(cbSnippet{"empty", "pass"}))
			if err != nil {
				t.Fatal(err)
			}
			o = append(o, s.cpu)
		}
		nanoOverhead[b.name] = cbMedian(o)
		t.Logf("%s: CPU of an empty run %.2f ms", b.name, nanoOverhead[b.name]*1000)
	}
	load0, _ := os.ReadFile("/proc/loadavg")
	for rep := 0; rep < reps; rep++ {
		for _, s := range snippets {
			code := cbWrap(s)
			var ref string
			for _, eng := range engines {
				var smp cbSample
				var body string
				var err error
				switch eng {
				case "native":
					var out []byte
					out, err = exec.Command("/usr/bin/python3", "-c", code).Output()
					if err == nil {
						smp.wall, smp.cpu, body, err = cbParse(string(out))
					}
					ref = body
				case "pyodide":
					smp, body, err = pyo.run(code)
				default:
					for _, b := range builds {
						if b.name == eng {
							smp, body, err = nanoRun(b.e, code)
							smp.cpu -= nanoOverhead[b.name]
						}
					}
				}
				if err != nil {
					t.Errorf("%s on %s: %v", s.name, eng, err)
					continue
				}
				if strings.TrimSpace(body) != strings.TrimSpace(ref) {
					t.Errorf("%s on %s printed %q, native %q", s.name, eng, cbTrunc(body), cbTrunc(ref))
				}
				samples[s.name][eng] = append(samples[s.name][eng], smp)
			}
		}
	}
	load1, _ := os.ReadFile("/proc/loadavg")

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nload before %s      after %s", strings.TrimSpace(string(load0)), string(load1))
	fmt.Fprintf(&sb, "median of %d; wall = time inside the snippet, cpu = CPU time; ratios to native\n", reps)
	fmt.Fprintf(&sb, "%-15s", "snippet")
	for _, e := range engines {
		fmt.Fprintf(&sb, " %18s", e+" wall/cpu ms")
	}
	for _, e := range engines[1:] {
		fmt.Fprintf(&sb, " %16s", e+" x wall/cpu")
	}
	sb.WriteString("\n")
	logs := map[string][2]float64{}
	for _, s := range snippets {
		fmt.Fprintf(&sb, "%-15s", s.name)
		med := map[string]cbSample{}
		for _, e := range engines {
			var w, c []float64
			for _, x := range samples[s.name][e] {
				w, c = append(w, x.wall), append(c, x.cpu)
			}
			med[e] = cbSample{cbMedian(w), cbMedian(c)}
			fmt.Fprintf(&sb, " %8.1f/%-9.1f", med[e].wall*1000, med[e].cpu*1000)
		}
		for _, e := range engines[1:] {
			rw, rc := med[e].wall/med["native"].wall, med[e].cpu/med["native"].cpu
			l := logs[e]
			logs[e] = [2]float64{l[0] + math.Log(rw), l[1] + math.Log(rc)}
			fmt.Fprintf(&sb, " %7.2f/%-8.2f", rw, rc)
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "%-15s", "GEOMEAN")
	for range engines {
		fmt.Fprintf(&sb, " %18s", "")
	}
	for _, e := range engines[1:] {
		n := float64(len(snippets))
		fmt.Fprintf(&sb, " %7.2f/%-8.2f", math.Exp(logs[e][0]/n), math.Exp(logs[e][1]/n))
	}
	sb.WriteString("\n")
	t.Log(sb.String())
}

// cbPyodideDriverJS answers JSON lines {"code": ...} with {"cpu_ms", "stdout", "error"}: node's
// CPU time over one runPython (Pyodide's own process_time is not the process's CPU).
const cbPyodideDriverJS = `"use strict";
const readline = require("readline");
const { loadPyodide } = require(process.argv[2]);
(async () => {
  let out = [];
  const py = await loadPyodide({ stdout: (s) => out.push(s), stderr: (s) => out.push(s) });
  process.stdout.write(JSON.stringify({ ready: true }) + "\n");
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    out = [];
    const c0 = process.cpuUsage();
    let error = "";
    try { py.runPython(JSON.parse(line).code, { globals: py.toPy({ __name__: "__main__" }) }); } catch (e) { error = String(e); }
    const c = process.cpuUsage(c0);
    process.stdout.write(JSON.stringify({ cpu_ms: (c.user + c.system) / 1000, stdout: out.join("\n"), error }) + "\n");
  }
})();
`

// cbPyodideDriver writes the driver into a temporary directory and returns its path and the
// Pyodide package's, or "" when Pyodide is off or not installed.
func cbPyodideDriver(t *testing.T) (script, pkg string) {
	if os.Getenv("COMPUTE_PYODIDE") == "0" {
		return "", ""
	}
	data := os.Getenv("AGENTBOX_DATA_DIR")
	if data == "" {
		home, _ := os.UserHomeDir()
		data = filepath.Join(home, ".cache", "agentbox")
	}
	pkg = filepath.Join(data, "bench", "pyodide", "node_modules", "pyodide")
	if _, err := os.Stat(pkg); err != nil {
		t.Logf("no Pyodide column: %v (agentbox bench nano installs it)", err)
		return "", ""
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Logf("no Pyodide column: %v", err)
		return "", ""
	}
	script = filepath.Join(t.TempDir(), "driver.cjs")
	if err := os.WriteFile(script, []byte(cbPyodideDriverJS), 0o644); err != nil {
		t.Fatal(err)
	}
	return script, pkg
}

func cbMedian(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	if len(y)%2 == 1 {
		return y[len(y)/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}
