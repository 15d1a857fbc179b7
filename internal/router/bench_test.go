package router

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// BenchmarkRoute measures what routing costs a request: scan, imports, decision. Inputs:
// testdata/bench/agent_1000.py (1,000 lines, 33 KB, made by gen.py) and a typical 8-line
// snippet. The figure to read is median-ns/op. Baselines run alongside, so the figure means
// something on a busy machine: "tree-sitter" is the same Route reading the code with tree-sitter
// alone, as the router did before its fast path (fast.go); "parse-only" is tree-sitter's parse of
// the code alone (the floor under a router built on it); "cpython-compile" is CPython's own
// compile() of it (python3 on PATH; what the interpreter pays before it runs a line).
//
//	go test -run XXX -bench Route -benchtime 200x -count 5 ./internal/router
func BenchmarkRoute(b *testing.B) {
	big, err := os.ReadFile("testdata/bench/agent_1000.py")
	if err != nil {
		b.Fatal(err)
	}
	small, err := os.ReadFile("testdata/snippets/pandas_groupby.py")
	if err != nil {
		b.Fatal(err)
	}
	r := New(fixtureOptions(b))
	tree := New(fixtureOptions(b))
	tree.treeOnly = true
	for _, in := range []struct {
		name string
		code []byte
	}{{"1000-lines", big}, {"snippet", small}} {
		req := &sandbox.RunRequest{Code: string(in.code), Tier: sandbox.TierAuto}
		if a, why := analyzeFast(in.code, r.targets); a == nil {
			b.Fatalf("%s: the fast path is unsure (%s)", in.name, why)
		}
		for _, rr := range []struct {
			name string
			r    *Router
		}{{in.name, r}, {in.name + "/tree-sitter", tree}} {
			b.Run(rr.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.code)))
				medianLoop(b, func() {
					if _, err := rr.r.Route(req); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
		b.Run(in.name+"/parse-only", func(b *testing.B) {
			b.SetBytes(int64(len(in.code)))
			medianLoop(b, func() {
				p := getParser()
				parse(p, in.code, parseBudget(len(in.code))).Close()
				putParser(p)
			})
		})
		b.Run(in.name+"/cpython-compile", func(b *testing.B) {
			cpythonCompile(b, in.code)
		})
	}
}

// cpythonCompile has python3 compile code b.N times and reports the median.
func cpythonCompile(b *testing.B, code []byte) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("no python3 for the baseline")
	}
	script := `import sys, time
src = sys.stdin.read()
n = int(sys.argv[1])
ts = []
for _ in range(n):
    t = time.perf_counter_ns()
    compile(src, "<string>", "exec")
    ts.append(time.perf_counter_ns() - t)
ts.sort()
print(ts[len(ts) // 2], sum(ts))
`
	// One process does all b.N compiles and reports their median and mean.
	cmd := exec.Command(py, "-c", script, strconv.Itoa(b.N))
	cmd.Stdin = bytes.NewReader(code)
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	var median, total int64
	if _, err := fmt.Sscan(string(out), &median, &total); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(median), "median-ns/op")
	b.ReportMetric(float64(total)/float64(b.N), "ns/op")
}

// medianLoop runs f b.N times and reports the median time of one run besides the mean.
func medianLoop(b *testing.B, f func()) {
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t := time.Now()
		f()
		times = append(times, time.Since(t))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns/op")
}
