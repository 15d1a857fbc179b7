package bench

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

func testBencher(o NanoOptions) *nanoBencher {
	o.Log = io.Discard
	o.defaults()
	return newNanoBencher(o)
}

func TestParsePool(t *testing.T) {
	t.Parallel()
	p, ok := parsePool("2 of 3 workers free, 5 warm interpreters")
	if !ok || p != (poolState{Free: 2, Workers: 3, Warm: 5, State: "2 of 3 workers free, 5 warm interpreters"}) {
		t.Errorf("parsePool = %+v, %v", p, ok)
	}
	state := "2 of 2 workers free, 3 warm interpreters, 1 of 2 session workers ready, 0 sessions hibernated"
	if p, ok := parsePool(state); !ok || p != (poolState{Free: 2, Workers: 2, Warm: 3, SessionReady: 1, SessionWorkers: 2, State: state}) {
		t.Errorf("parsePool(%q) = %+v, %v", state, p, ok)
	}
	if _, ok := parsePool("running"); ok {
		t.Error(`parsePool("running") reported a pool`)
	}
}

func TestNanoScenariosOnFake(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 2, warmCap: 4, warm: 4, refill: 2 * time.Millisecond}
	b := testBencher(NanoOptions{N: 20, Concurrency: 3})
	b.nanoWarm(context.Background(), f)
	b.nanoSession(context.Background(), f)
	if len(b.res.Rows) != 3 {
		t.Fatalf("got %d rows, want 3: %+v", len(b.res.Rows), b.res.Rows)
	}
	paced := b.res.Rows[0]
	if paced.Error != "" || paced.Stats == nil || paced.Stats.N != 20 {
		t.Fatalf("paced row: %+v", paced)
	}
	if !strings.Contains(paced.Detail, "23 of 23 runs served warm") || !strings.Contains(paced.Detail, "poll the daemon's health") {
		t.Errorf("paced detail = %q", paced.Detail)
	}
	if tp := b.res.Rows[1]; tp.Group != groupThroughput || tp.Stats == nil || tp.Stats.N != 20 {
		t.Errorf("throughput row: %+v", tp)
	}
	if s := b.res.Rows[2]; s.Error != "" || s.Stats == nil || s.Stats.N != 20 {
		t.Errorf("session row: %+v", s)
	}
}

func TestPacerFallsBackToFixedPause(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1, noPool: true}
	b := testBencher(NanoOptions{})
	p, err := b.newPacer(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if p.fixed != time.Second || len(b.res.Notes) != 1 {
		t.Errorf("fixed = %v, notes = %q", p.fixed, b.res.Notes)
	}
}

func TestPacerWaitsForRefill(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1, refill: 30 * time.Millisecond}
	b := testBencher(NanoOptions{})
	p, err := b.newPacer(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	p.settle = 0
	if _, err := f.Run(context.Background(), helloCode, time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("wait returned after %v, before the pool refilled", waited)
	}
	if s, _, _ := f.Pool(context.Background()); s.Warm != 1 {
		t.Errorf("pool after wait: %s", s)
	}
}

func TestComputeOnFake(t *testing.T) {
	t.Parallel()
	b := testBencher(NanoOptions{Reps: 2})
	var err error
	if b.snippets, err = loadSnippets(); err != nil {
		t.Fatal(err)
	}
	if len(b.snippets) != 9 {
		t.Errorf("the compute set has %d snippets, want 9", len(b.snippets))
	}
	b.initCompute()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1}
	var order []string // engine of each run, in the order they ran
	var engines []computeEngine
	for _, e := range []string{engineNative, engineNano} {
		engines = append(engines, computeEngine{e, func(ctx context.Context, code string) (string, error) {
			order = append(order, e)
			res, err := f.Run(ctx, code, time.Minute)
			return res.Stdout, err
		}})
	}
	waits := 0
	b.computeInterleaved(context.Background(), engines, func(context.Context, string) error { waits++; return nil })
	if waits != len(order) {
		t.Errorf("%d waits for %d runs, want one before each", waits, len(order))
	}
	// Interleaved: each snippet on both engines before the next snippet, every repetition of the
	// whole set before the next, the engine going first alternating.
	if len(order) != 2*2*len(b.snippets) {
		t.Fatalf("%d runs, want %d", len(order), 2*2*len(b.snippets))
	}
	for k := 0; k < len(order); k += 2 {
		rep, i := k/2/len(b.snippets), k/2%len(b.snippets)
		first := engines[(rep+i)%2].name
		if order[k] != first || order[k+1] == first {
			t.Fatalf("run %d and %d (repetition %d, snippet %d) on %s, %s; want %s first", k, k+1, rep, i, order[k], order[k+1], first)
		}
	}
	c := b.computeResults()
	if g := c.Geomean[engineNano]; g != 1 {
		t.Errorf("geomean nano = %v, want 1", g)
	}
	if _, ok := c.Geomean[enginePyodide]; ok {
		t.Error("a geomean for pyodide, which did not run")
	}
	for _, s := range c.Snippets {
		if s.Median[engineNano] != 0.5 || len(s.Times[engineNano]) != 2 || s.Outputs[engineNano] != "42" {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
}

// The compute runs wait for the nano pool's refill after a nano run, on every engine.
func TestComputePacerWaitsForRefill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeTarget{workers: 1, warmCap: 2, warm: 2, refill: 300 * time.Millisecond}
	// The fallback for a pool whose state never changes (the fake's never does) is put past the
	// wait's own bound, so a wait that returns returned on the refill, however loaded the
	// machine (a one-second fallback once fired before a 300 ms refill was seen at load ~60).
	p := &computePacer{t: f, settle: 2 * computePaceTimeout}
	if err := p.wait(ctx, engineNano); err != nil || p.want != 2 {
		t.Fatalf("first wait: %v, want %d", err, p.want)
	}
	if _, err := f.Run(ctx, "print('hi')", time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.wait(ctx, engineNative); err != nil {
		t.Fatal(err)
	}
	// Not before the refill; and on the refill, not on the fallback (nor on the wait's bound).
	if d := time.Since(start); d < 250*time.Millisecond || d >= computePaceTimeout {
		t.Errorf("waited %v for a 300ms refill", d)
	}
	if s, _, _ := f.Pool(ctx); s.Warm != 2 {
		t.Errorf("pool after the wait: %s", s)
	}
}

func TestSnippetImportsUntimed(t *testing.T) {
	t.Parallel()
	if got := topImports("import a, b.c\nfrom d.e import f\n  import g\nx = 'import h'\nimport i  \n"); strings.Join(got, " ") != "a b.c d.e i" {
		t.Errorf("topImports = %q", got)
	}
	snippets, err := loadSnippets()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sha256": "hashlib", "json_roundtrip": "json", "regex": "re", "sort": "random"}
	for _, s := range snippets {
		if got := strings.Join(s.Imports, " "); got != want[s.Name] {
			t.Errorf("%s imports %q, want %q", s.Name, got, want[s.Name])
		}
		// The imports come before the clock starts: the same boundary on every engine.
		w := wrapSnippet(s)
		if i, j := strings.Index(w, "__import__("), strings.Index(w, "_bench_t0 ="); want[s.Name] != "" && (i < 0 || i > j) {
			t.Errorf("%s: imports not before the clock:\n%s", s.Name, w)
		}
	}
}

func TestCheckGuestClock(t *testing.T) {
	t.Parallel()
	out := func(secs string) string { return "x\n\n" + timingMarker + secs + "\n" }
	tests := []struct {
		name    string
		res     runResult
		wantErr bool
	}{
		{"agree", runResult{Stdout: out("1.0"), Execute: 1100 * time.Millisecond}, false},
		{"fake clock reads almost nothing", runResult{Stdout: out("0.002"), Execute: time.Second}, true},
		{"clock runs fast", runResult{Stdout: out("5"), Execute: time.Second}, true},
		{"too short to judge", runResult{Stdout: out("0.001"), Execute: 10 * time.Millisecond}, false},
		{"no execute time", runResult{Stdout: out("0.001")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := checkGuestClock(tt.res); (err != nil) != tt.wantErr {
				t.Errorf("checkGuestClock = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// A pool that says what it aims at is full when it gets there, however slowly it fills (a heavy
// pool first makes its template, then restores one sandbox at a time).
func TestPacerWaitsForThePoolsTarget(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 4, warmCap: 2, warmTarget: 2}
	go func() {
		for i := 0; i < 2; i++ {
			time.Sleep(150 * time.Millisecond)
			f.mu.Lock()
			f.warm++
			f.mu.Unlock()
		}
	}()
	p := &pacer{t: f, poll: time.Millisecond, settle: 50 * time.Millisecond}
	if err := p.settleFull(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.full.Warm != 2 {
		t.Errorf("full = %s, want the 2 warm the pool aims at", p.full)
	}
	// The pool then aims lower: its target says when it is full again.
	f.mu.Lock()
	f.warm, f.warmTarget = 1, 1
	f.mu.Unlock()
	start := time.Now()
	if err := p.wait(context.Background()); err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("wait = %v after %v", err, time.Since(start))
	}
}
