package heavy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// The latest step of a heavy session becomes durable when the session rests: a session restored
// from that checkpoint (as another daemon would, after a kill -9) holds the step's variables and
// files even when the live interpreter had moved on when it was taken; an older step is not
// checkpointed once a newer one exists; the checkpoint holds none of the session's secrets.
func TestDurableLatestStep(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, DurableQuiet: 50 * time.Millisecond})
	secret := "tok-5e4d3c2b1a09f8e7d6c5"
	env := map[string]string{"TOKEN": secret}
	ctx := context.Background()
	sess, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: limits(t, 120*time.Second), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s := sess.(*session)
	run := func(code string) string {
		t.Helper()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Env: env, Limits: limits(t, 120*time.Second)})
		if err != nil || res.Error != nil {
			t.Fatalf("%q: %v %+v", code, err, res)
		}
		return res.Stdout
	}
	run("import os\nx = 1\nseen = len(os.environ['TOKEN'])\nopen('/home/user/f.txt', 'w').write('one')")
	if err := s.Snapshot(ctx, "st_1"); err != nil {
		t.Fatal(err)
	}
	run("x = 2\nopen('/home/user/f.txt', 'w').write('two')")
	if err := s.Snapshot(ctx, "st_2"); err != nil {
		t.Fatal(err)
	}
	// st_1 is no longer the latest: coalesced away, at once.
	if ref, err := s.Persist(ctx, "st_1"); err != nil || ref.Ref != "" {
		t.Fatalf("an older step was checkpointed: %+v %v", ref, err)
	}
	// The live interpreter moves on before st_2's checkpoint runs.
	run("x = 3\nopen('/home/user/f.txt', 'w').write('three')")
	quota := cpuQuotaOf(t, s)
	ref, err := s.Persist(ctx, "st_2")
	// The checkpoint lifts the sandbox's CPU quota while it runs (the daemon's work) and puts it
	// back: the user's code is held to heavy.cpus again.
	if strings.HasPrefix(quota, "-1") || strings.HasPrefix(quota, "max") {
		t.Fatalf("the sandbox has no CPU quota (%q): heavy.cpus sets one by default", quota)
	}
	if got := cpuQuotaOf(t, s); got != quota {
		t.Fatalf("the sandbox's CPU quota after a durable checkpoint: %q, before it %q", got, quota)
	}
	if err != nil || ref.Ref == "" || !ref.Latest {
		t.Fatalf("the latest step was not made durable: %+v %v", ref, err)
	}
	if got := run("print(x, open('/home/user/f.txt').read())"); got != "3 three\n" {
		t.Fatalf("the live session after its checkpoint: %q", got)
	}
	found := 0
	_ = filepath.Walk(store.Dir(), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			found += bytes.Count(b, []byte(secret))
		}
		return nil
	})
	if found != 0 {
		t.Fatalf("the durable checkpoint holds the session's secret %d times", found)
	}
	c := rt.DurableCosts()
	if c.Count != 1 {
		t.Fatalf("checkpoints counted: %d", c.Count)
	}
	t.Logf("durable checkpoint of a latest step: held the session %v, durable after %v, %d MB", c.Held[0], c.Total[0], c.Bytes[0]>>20)

	// A restore, as a daemon restarted after a kill -9 (or another node) makes it.
	s.Close()
	back, err := rt.Restore(ctx, ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	res, err := back.Run(ctx, &sandbox.RunRequest{Code: "print(x, seen, open('/home/user/f.txt').read())", Limits: limits(t, 120*time.Second)})
	if err != nil || res.Error != nil {
		t.Fatalf("restored: %v %+v", err, res)
	}
	if res.Stdout != "2 24 two\n" {
		t.Fatalf("restored at st_2: %q, want \"2 24 two\"", res.Stdout)
	}
}

// cpuQuotaOf reads the CPU quota of s's sandbox's cgroup as the kernel shows it.
func cpuQuotaOf(t *testing.T, s *session) string {
	t.Helper()
	b := s.boxNow()
	return cgroupFile(t, b, "cpu.cfs_quota_us", "cpu.max")
}

// discard is an OutputSink that keeps nothing.
type discard struct{}

func (discard) Write(sandbox.Stream, []byte) {}

// While a command runs in the sandbox (a server that never ends), a step is not checkpointed,
// however long the session waits: Persist refuses with sandbox.ErrNotDurableNow and says why
// (the Manager turns it into a not_durable notice). Once the command ends, the step is made
// durable.
func TestDurableRefusedWhileACommandRuns(t *testing.T) {
	rt := ttRuntime(t, Options{DurableQuiet: 50 * time.Millisecond, DurableMaxDefer: 200 * time.Millisecond})
	ctx := context.Background()
	s := ttSession(t, rt)
	p, err := s.StartCommand(ctx, sandbox.CommandSpec{Argv: []string{"sleep", "600"}, Dir: "/home/user"}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, &sandbox.RunRequest{Code: "x = 7", Limits: limits(t, 120*time.Second)})
	if err != nil || res.Error != nil {
		t.Fatalf("run: %v %+v", err, res)
	}
	if err := s.Snapshot(ctx, "st_1"); err != nil {
		t.Fatal(err)
	}
	ref, err := s.Persist(ctx, "st_1")
	if !errors.Is(err, sandbox.ErrNotDurableNow) || ref.Ref != "" || !strings.Contains(err.Error(), "1 command(s) running") {
		t.Fatalf("Persist with a command running: %+v %v, want ErrNotDurableNow naming the command", ref, err)
	}
	t.Logf("refused: %v", err)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end within 30s of its kill")
	}
	ref, err = s.Persist(ctx, "st_1")
	if err != nil || ref.Ref == "" {
		t.Fatalf("Persist once the command ended: %+v %v", ref, err)
	}
}

// A run that arrives while the latest step's durable checkpoint is being taken gets its answer,
// and the checkpoint holds the step's state exactly, not the run's: an array the run changes in
// place, a variable and a file are the step's in a session restored from it, while the live
// session has the run's. (How long the run waits is the bench's: `bench steps -tier heavy`.)
func TestDurableCheckpointWithARunArriving(t *testing.T) {
	rt := ttRuntime(t, Options{DurableQuiet: 50 * time.Millisecond})
	ctx := context.Background()
	s := ttSession(t, rt)
	out(t, s, "import numpy as np\na = np.arange(4_000_000, dtype=np.int64)\nsum0 = int(a.sum())\nx = 0\nopen('/home/user/f.txt', 'w').write('zero')")
	for try := 1; ; try++ {
		step := fmt.Sprintf("st_%d", try)
		out(t, s, fmt.Sprintf("a = np.arange(4_000_000, dtype=np.int64)\nx = %d\nopen('/home/user/f.txt', 'w').write('step %d')", try, try))
		if err := s.Snapshot(ctx, step); err != nil {
			t.Fatal(err)
		}
		// The checkpoint holds the sandbox (its gate up): now a run.
		done, yields := persistUntilHeld(ctx, t, rt, s, step)
		answer := send(func() (string, error) {
			return runCode(ctx, t, s, "a += 7\nx = -1\nopen('/home/user/f.txt', 'w').write('run')\nprint(int(a.sum()) - sum0)")
		})
		for !s.running.Load() {
			time.Sleep(100 * time.Microsecond)
		}
		during := gateUp(s) // the run came while the checkpoint held the sandbox
		p := receive(t, done, "the durable checkpoint did not end")
		r := receive(t, answer, "the run that arrived during the checkpoint got no answer")
		if r.err != nil || r.out != "28000000\n" {
			t.Fatalf("the run that arrived during the checkpoint: %q %v", r.out, r.err)
		}
		if p.err != nil || p.ref.Ref == "" {
			t.Fatalf("the step was not made durable: %+v %v", p.ref, p.err)
		}
		yielded := rt.DurableCosts().Yields > yields
		if !during || !yielded {
			if try == 5 {
				t.Fatalf("in 5 tries the run never arrived while the checkpoint held the sandbox and cancelled it (last: during %v, yielded %v)", during, yielded)
			}
			t.Logf("try %d: the checkpoint ended before the run was sent or cancelled it (during %v, yielded %v); again", try, during, yielded)
			continue
		}
		// The checkpoint yielded to the run (the runsc patch's cancel) and was taken again at
		// the session's next quiet moment: the run got its answer before the step was durable.
		if !r.at.Before(p.at) {
			t.Fatalf("the run's answer (%v) came after the checkpoint ended (%v): it waited for it", r.at, p.at)
		}
		t.Logf("try %d: the run took %v; the checkpoint's cancels cost %v", try, r.took, rt.DurableCosts().YieldCost)
		if got := out(t, s, "print(int(a.sum()) - sum0, x, open('/home/user/f.txt').read())"); got != "28000000 -1 run\n" {
			t.Fatalf("the live session after the run: %q", got)
		}
		back, err := rt.Restore(ctx, p.ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		defer back.Close()
		t.Logf("try %d: the run arrived while the checkpoint held the sandbox; checkpoints' hold so far: %v", try, rt.DurableCosts().Held)
		want := fmt.Sprintf("0 %d step %d\n", try, try)
		if got := out(t, back, "print(int(a.sum()) - sum0, x, open('/home/user/f.txt').read())"); got != want {
			t.Fatalf("restored from the checkpoint taken while the run waited: %q, want %q", got, want)
		}
		return
	}
}

// A durable checkpoint cancelled ten times in a row (each at another point of the sentry's save:
// before it, in its kernel state's encoding, in its memory file's scan and page writes) leaves
// the session as it was: its state and files, its template pages shared and read-only, its memory
// file not grown, nothing of the cancelled checkpoints in the store; after durableMaxYields in a
// row the next checkpoint does not yield to a run that arrives during it (the run waits for it),
// completes, and a session restored from it has the step's state.
func TestDurableCheckpointCancelledTenTimes(t *testing.T) {
	storeDir := t.TempDir()
	store, err := snapstore.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, Warm: 1, DurableQuiet: 50 * time.Millisecond})
	ctx := context.Background()
	waitWarm(t, rt, 1)
	s := ttSession(t, rt)
	if !s.b.restored || !sentryMapsPages(s) {
		t.Fatalf("the session was not restored from the template with its pages shared (restored %v)", s.b.restored)
	}
	out(t, s, "import numpy as np\na = np.arange(4_000_000, dtype=np.int64)\nsum0 = int(a.sum())\na += 3\nx = 'kept'\nopen('/home/user/f.txt', 'w').write('step')")
	if err := s.Snapshot(ctx, "y1"); err != nil {
		t.Fatal(err)
	}
	const probe = "print(int(a.sum()) - sum0, x, open('/home/user/f.txt').read())"
	const want = "12000000 kept step\n"
	storeFiles := func() int {
		n := 0
		filepath.WalkDir(storeDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	// The baseline after a completed checkpoint: a save's zero scan gives the never-touched
	// pages back and a resumed save shares the template's pages again, so the memory file after
	// one is what it is after the next, not what it was before the first.
	if ref, err := s.checkpointStep(ctx, "y1", false); err != nil || ref.Ref == "" {
		t.Fatalf("the first checkpoint: %+v %v", ref, err)
	}
	shared0, _ := templatePages(t, s)
	before := settledMemoryFileBytes(t, s)
	files0 := storeFiles()
	costs0 := rt.DurableCosts()
	var costs []time.Duration
	cancelOne := func(i int) {
		t.Helper()
		// 0 to 36 ms after `runsc checkpoint` started: its start, the save's sequential part,
		// then the kernel's encoding beside the memory file's save.
		delay := time.Duration(i%10) * 4 * time.Millisecond
		cost, err := cancelledCheckpoint(ctx, t, s, "y1", delay)
		costs = append(costs, cost)
		if !errors.Is(err, errYielded) {
			t.Fatalf("cancel %d (%v after the start): %v, want a cancelled checkpoint", i+1, delay, err)
		}
		// No run between them (a run's allocations would move the memory file): the sandbox
		// is checked alive (cancelledCheckpoint) and its state after the ten.
	}
	for i := 0; i < 10; i++ {
		cancelOne(i)
	}
	t.Logf("ten cancels: from the cancel to the session free %v", costs[:10])
	if c := rt.DurableCosts(); c.Yields != costs0.Yields+10 || c.Count != costs0.Count {
		t.Fatalf("durable costs after ten cancels: %d yields, %d checkpoints (before: %d, %d)", c.Yields, c.Count, costs0.Yields, costs0.Count)
	}
	if n := storeFiles(); n != files0 {
		t.Fatalf("the store holds %d files after ten cancelled checkpoints, %d before", n, files0)
	}
	if ents, _ := os.ReadDir(store.TmpDir()); len(ents) != 0 {
		t.Fatalf("cancelled checkpoints left %d entries in the store's tmp dir", len(ents))
	}
	after := settledMemoryFileBytes(t, s)
	shared1, _ := templatePages(t, s)
	t.Logf("memory file %.1f MiB before the cancels, %.1f after; template pages mapped %d before, %d after",
		float64(before)/(1<<20), float64(after)/(1<<20), len(shared0), len(shared1))
	if after > before+4<<20 {
		t.Fatalf("the memory file grew over ten cancelled checkpoints: %.1f MiB before, %.1f after", float64(before)/(1<<20), float64(after)/(1<<20))
	}
	if len(shared1) < len(shared0) {
		t.Fatalf("the sandbox maps %d template pages after the cancels, %d before: the template's pages were not shared again", len(shared1), len(shared0))
	}
	pagesReadOnly(t, s)
	if got := out(t, s, probe); got != want {
		t.Fatalf("after the cancels: %q, want %q", got, want)
	}
	// Changed after the step: the checkpoint is the step's, the live session the change.
	out(t, s, "a += 1\nx = 'live'\nopen('/home/user/f.txt', 'w').write('live')")
	// Six more make durableMaxYields in a row: the session's next checkpoint does not yield to
	// a run arriving during it, completes, and the run waits for it (a session whose runs
	// always come during its checkpoints still gets durable).
	var ref sandbox.SnapshotRef
	for try, i := 1, 10; ; try++ {
		for ; yieldStreak(s) < durableMaxYields; i++ {
			cancelOne(i)
		}
		before := rt.DurableCosts()
		p, run, during := runDuring(ctx, t, s, checkpointAsync(ctx, s, "y1"), "print(x)")
		if p.err != nil || p.ref.Ref == "" {
			t.Fatalf("the checkpoint after %d cancels in a row, a run arriving during it: %+v %v", durableMaxYields, p.ref, p.err)
		}
		if run.err != nil || run.out != "live\n" {
			t.Fatalf("the run that arrived during the checkpoint: %q %v", run.out, run.err)
		}
		if a := rt.DurableCosts(); a.Yields != before.Yields || a.Count != before.Count+1 {
			t.Fatalf("durable costs after the checkpoint: %d yields, %d checkpoints (before it: %d, %d)", a.Yields, a.Count, before.Yields, before.Count)
		}
		if yieldStreak(s) != 0 {
			t.Fatal("a completed checkpoint did not end the session's streak of yields")
		}
		if ref = p.ref; during {
			break
		}
		if try == 3 {
			t.Fatal("in 3 tries the run never arrived while the checkpoint held the sandbox")
		}
		t.Logf("try %d: the checkpoint ended before the run arrived; again", try)
	}
	back, err := rt.Restore(ctx, ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if got := out(t, back, probe); got != want {
		t.Fatalf("restored from the checkpoint after ten cancels: %q, want %q", got, want)
	}
	if got := out(t, s, probe); got != "16000000 live live\n" {
		t.Fatalf("the live session after the checkpoint: %q", got)
	}
}

// yieldStreak is how many of the session's durable checkpoints in a row yielded.
func yieldStreak(s *session) int {
	s.yield.mu.Lock()
	defer s.yield.mu.Unlock()
	return s.yield.streak
}

// checkpointRunning says whether the session's cancellable checkpoint has its `runsc checkpoint`
// running (the cancel's pipe open).
func checkpointRunning(s *session) bool {
	s.yield.mu.Lock()
	defer s.yield.mu.Unlock()
	return s.yield.w != nil
}

// cancelledCheckpoint takes step's durable checkpoint, cancellable (checkpointStep), and cancels
// it delay after its `runsc checkpoint` started, as a request arriving then does: it returns how
// long from the cancel until the checkpoint returned, and the checkpoint's error (errYielded
// for a cancelled one). The sandbox must be alive after it.
func cancelledCheckpoint(ctx context.Context, t *testing.T, s *session, step string, delay time.Duration) (time.Duration, error) {
	t.Helper()
	done := checkpointAsync(ctx, s, step)
	untilCheckpointRuns(t, s, done)
	time.Sleep(delay)
	t0 := time.Now()
	s.yield.cancel()
	p := receive(t, done, "the cancelled checkpoint did not return")
	cost := time.Since(t0)
	if b := s.boxNow(); b == nil || !b.alive() {
		t.Fatalf("the sandbox ended after a cancelled checkpoint (%v)", p.err)
	}
	return cost, p.err
}

// checkpointAsync takes step's durable checkpoint, cancellable as the session's streak of yields
// allows (checkpointStep), in a goroutine of its own.
func checkpointAsync(ctx context.Context, s *session, step string) <-chan persisted {
	done := make(chan persisted, 1)
	go func() {
		ref, err := s.checkpointStep(ctx, step, true)
		done <- persisted{ref, err, time.Now()}
	}()
	return done
}

// persistAsync runs s.Persist(step) in a goroutine of its own.
func persistAsync(ctx context.Context, s *session, step string) <-chan persisted {
	done := make(chan persisted, 1)
	go func() {
		ref, err := s.Persist(ctx, step)
		done <- persisted{ref, err, time.Now()}
	}()
	return done
}

// untilCheckpointRuns waits until the session's cancellable checkpoint, whose result comes on
// done, has its `runsc checkpoint` running; a checkpoint that returns first fails the test.
func untilCheckpointRuns(t *testing.T, s *session, done <-chan persisted) {
	t.Helper()
	waitFor(t, "the checkpoint's runsc did not start", func() bool { return checkpointRunning(s) || len(done) > 0 })
	if len(done) > 0 {
		p := <-done
		t.Fatalf("the checkpoint returned before its runsc started: %+v %v", p.ref, p.err)
	}
}

// waitFor polls cond until it holds; failed says what did not happen, if not within 2 minutes.
func waitFor(t *testing.T, failed string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s within 2 minutes", failed)
		}
	}
}

// receive returns what ch gives; failed says what did not happen, if nothing comes within 2
// minutes.
func receive[T any](t *testing.T, ch <-chan T, failed string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s within 2 minutes", failed)
		var zero T
		return zero
	}
}

// answered is what a request sent during a checkpoint answered, when, and how long it took.
type answered struct {
	out  string
	err  error
	at   time.Time
	took time.Duration
}

// send makes the request do in a goroutine of its own.
func send(do func() (string, error)) <-chan answered {
	answer := make(chan answered, 1)
	go func() {
		t0 := time.Now()
		o, err := do()
		answer <- answered{o, err, time.Now(), time.Since(t0)}
	}()
	return answer
}

// runCode runs code in s and returns its stdout, and a Python exception as an error.
func runCode(ctx context.Context, t *testing.T, s sandbox.Session, code string) (string, error) {
	res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: limits(t, 120*time.Second)})
	if err != nil {
		return "", err
	}
	if res.Error != nil {
		return res.Stdout, fmt.Errorf("%s: %s", res.Error.Name, res.Error.Value)
	}
	return res.Stdout, nil
}

// runDuring sends a run of code once the durable checkpoint whose result comes on done holds
// the sandbox; during says the run arrived (it had asked for the session) while it did.
func runDuring(ctx context.Context, t *testing.T, s *session, done <-chan persisted, code string) (p persisted, run answered, during bool) {
	t.Helper()
	waitFor(t, "the checkpoint did not hold the sandbox", func() bool { return gateUp(s) })
	answer := send(func() (string, error) { return runCode(ctx, t, s, code) })
	for !s.running.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	during = gateUp(s)
	p = receive(t, done, "the durable checkpoint did not end")
	run = receive(t, answer, "the run that arrived during the checkpoint got no answer")
	return p, run, during
}

// durableSession is a session of a runtime with opts (DurableQuiet 50 ms if not set) that ran
// code and took its step's snapshot y1.
func durableSession(t *testing.T, opts Options, code string) (*Runtime, *session) {
	t.Helper()
	if opts.DurableQuiet == 0 {
		opts.DurableQuiet = 50 * time.Millisecond
	}
	rt := ttRuntime(t, opts)
	s := ttSession(t, rt)
	out(t, s, code)
	if err := s.Snapshot(context.Background(), "y1"); err != nil {
		t.Fatal(err)
	}
	return rt, s
}

// A request already in flight when the durable checkpoint would quiesce the sandbox (a slow file
// read that came before the checkpoint could be cancelled, so it did not cancel it) makes the
// checkpoint yield as a request arriving later does, not fail with a conflict: Persist takes it
// again DurableQuiet after, once the request has its answer.
func TestDurableCheckpointYieldsToARequestInFlight(t *testing.T) {
	rt, s := durableSession(t, Options{}, "x = 1")
	// The request in flight as the daemon sees it: registered, its answer not back yet.
	b := s.boxNow()
	id, err := b.register(&call{})
	if err != nil {
		t.Fatal(err)
	}
	done := persistAsync(context.Background(), s, "y1")
	waitFor(t, "the checkpoint did not yield to the request in flight", func() bool { return rt.DurableCosts().Yields > 0 || len(done) > 0 })
	asked := s.yield.lastAsked()
	b.unregister(id) // its answer came
	if len(done) > 0 {
		p := <-done
		t.Fatalf("Persist with a request in flight: %+v %v, want its checkpoint to yield to the request and be taken again", p.ref, p.err)
	}
	p := receive(t, done, "Persist did not end after the request's answer")
	if p.err != nil || p.ref.Ref == "" {
		t.Fatalf("Persist once the request in flight had its answer: %+v %v", p.ref, p.err)
	}
	// The yield counts as a request's cancel: the next try waits DurableQuiet after it.
	if asked.IsZero() {
		t.Fatal("the yield to the request in flight was not recorded as a request's (the next try would not wait for a quiet moment)")
	}
	if got := out(t, s, "print(x)"); got != "1\n" {
		t.Fatalf("the session after its checkpoint: %q", got)
	}
}

// A checkpoint that may no longer yield (its yields used up, or past DurableMaxDefer) waits for
// a request already in flight to be answered and completes, rather than give its step up as a
// conflict; one whose request is not answered within durableInFlightWait gives it up, saying
// so, and the session goes on.
func TestDurableCheckpointNotCancellableWaitsForARequestInFlight(t *testing.T) {
	_, s := durableSession(t, Options{}, "x = 1")
	ctx := context.Background()
	b := s.boxNow()
	id, err := b.register(&call{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan persisted, 1)
	go func() {
		ref, err := s.checkpointStep(ctx, "y1", false)
		done <- persisted{ref, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	if len(done) > 0 {
		p := <-done
		t.Fatalf("a checkpoint that may not yield, with a request in flight, returned before its answer: %+v %v", p.ref, p.err)
	}
	b.unregister(id) // its answer came
	if p := receive(t, done, "the checkpoint did not end after the request's answer"); p.err != nil || p.ref.Ref == "" {
		t.Fatalf("the checkpoint once the request in flight had its answer: %+v %v", p.ref, p.err)
	}
	old := durableInFlightWait
	durableInFlightWait = 200 * time.Millisecond
	t.Cleanup(func() { durableInFlightWait = old })
	out(t, s, "x = 2")
	if err := s.Snapshot(ctx, "y2"); err != nil {
		t.Fatal(err)
	}
	if id, err = b.register(&call{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.checkpointStep(ctx, "y2", false)
	b.unregister(id)
	if sandbox.KindOf(err) != sandbox.KindConflict || !strings.Contains(err.Error(), "not answered within 200ms") {
		t.Fatalf("a checkpoint whose request in flight was never answered: %v, want a conflict naming the wait", err)
	}
	if got := out(t, s, "print(x)"); got != "2\n" {
		t.Fatalf("the session after the checkpoint gave its step up: %q", got)
	}
}

// After one of the session's durable checkpoints yielded, the next ones yield only until
// DurableMaxDefer after it, and a step's checkpoints only until DurableMaxDefer after its Persist
// began: past either, the next is not cancelled by a run arriving during it and completes, and
// the run waits for it (a session whose runs always come during its checkpoints still gets
// durable).
func TestDurableCheckpointNotCancelledPastMaxDefer(t *testing.T) {
	rt, s := durableSession(t, Options{DurableMaxDefer: 300 * time.Millisecond}, "import numpy as np\na = np.arange(4_000_000, dtype=np.int64)\nx = 'step'")
	ctx := context.Background()
	// notCancelled takes a checkpoint (start) with a run arriving during it, which must not
	// cancel it; false if the run came too late to tell.
	notCancelled := func(what string, start func() <-chan persisted) bool {
		t.Helper()
		before := rt.DurableCosts()
		p, run, during := runDuring(ctx, t, s, start(), "print(x)")
		if p.err != nil || p.ref.Ref == "" {
			t.Fatalf("the checkpoint %s, a run arriving during it: %+v %v", what, p.ref, p.err)
		}
		if run.err != nil || run.out != "step\n" {
			t.Fatalf("the run that arrived during the checkpoint %s: %q %v", what, run.out, run.err)
		}
		if a := rt.DurableCosts(); a.Yields != before.Yields || a.Count != before.Count+1 {
			t.Fatalf("durable costs after the checkpoint %s: %d yields, %d checkpoints (before it: %d, %d)", what, a.Yields, a.Count, before.Yields, before.Count)
		}
		if !during {
			t.Logf("the checkpoint %s ended before the run arrived; again", what)
		}
		return during
	}
	for try := 1; ; try++ {
		if _, err := cancelledCheckpoint(ctx, t, s, "y1", 0); !errors.Is(err, errYielded) {
			t.Fatalf("the first checkpoint, cancelled: %v, want a cancelled checkpoint", err)
		}
		s.yield.mu.Lock()
		first := s.yield.since
		s.yield.mu.Unlock()
		time.Sleep(time.Until(first.Add(rt.opts.DurableMaxDefer)) + time.Millisecond)
		if notCancelled("DurableMaxDefer after the first yield", func() <-chan persisted { return checkpointAsync(ctx, s, "y1") }) {
			break
		}
		if try == 3 {
			t.Fatal("in 3 tries the run never arrived while the checkpoint held the sandbox")
		}
	}
	// The session's streak of yields is empty now: the step's own deadline (Persist's, passed
	// to persistOnce) is what makes this one not cancellable.
	pastDeadline := func() <-chan persisted {
		done := make(chan persisted, 1)
		go func() {
			ref, err := s.persistOnce(ctx, "y1", time.Now(), false)
			done <- persisted{ref, err, time.Now()}
		}()
		return done
	}
	for try := 1; !notCancelled("past its step's deadline", pastDeadline); try++ {
		if try == 3 {
			t.Fatal("in 3 tries the run never arrived while the checkpoint held the sandbox")
		}
	}
}

// A cancelled durable checkpoint is not recorded as a save error, neither the step's nor the
// sandbox's: Persist over a cancel returns the step's checkpoint with no error (taken again), and
// right after a cancel each of the session's other saves works and reports none: a fork (`runsc
// checkpoint --leave-running` and a restore), a pause (`runsc checkpoint`, the sandbox ended, as
// a close with keep pauses) and its resume, a restore of the durable checkpoint.
func TestDurableCheckpointCancelledThenForkPauseRestore(t *testing.T) {
	rt, s := durableSession(t, Options{}, "import numpy as np\na = np.arange(4_000_000, dtype=np.int64)\nsum0 = int(a.sum())\na += 3\nx = 'step'\nopen('/home/user/f.txt', 'w').write('step')")
	ctx := context.Background()
	const probe = "print(int(a.sum()) - sum0, x, open('/home/user/f.txt').read())"
	const want = "12000000 step step\n"
	// Persist, its first checkpoint cancelled once its runsc runs.
	done := persistAsync(ctx, s, "y1")
	untilCheckpointRuns(t, s, done)
	s.yield.cancel()
	p := receive(t, done, "Persist did not end")
	if p.err != nil || p.ref.Ref == "" {
		t.Fatalf("Persist over a cancelled checkpoint: %+v %v", p.ref, p.err)
	}
	if c := rt.DurableCosts(); c.Yields != 1 || c.Count != 1 {
		t.Fatalf("after Persist: %d yields, %d checkpoints; want its first cancelled, its second taken", c.Yields, c.Count)
	}
	cancel := func(before string) {
		t.Helper()
		if _, err := cancelledCheckpoint(ctx, t, s, "y1", 8*time.Millisecond); !errors.Is(err, errYielded) {
			t.Fatalf("the checkpoint before the %s: %v, want a cancelled checkpoint", before, err)
		}
	}
	cancel("fork")
	f, err := s.Fork(ctx, "y1", "", sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatalf("a fork right after a cancelled checkpoint: %v", err)
	}
	got := out(t, f, probe)
	f.Close()
	if got != want {
		t.Fatalf("the fork: %q, want %q", got, want)
	}
	out(t, s, "x = 'live'")
	cancel("pause")
	if ref, err := s.Pause(ctx); err != nil || ref.Ref == "" {
		t.Fatalf("a pause right after a cancelled checkpoint: %+v %v", ref, err)
	}
	if got := out(t, s, "print(x)"); got != "live\n" { // resumed
		t.Fatalf("the session resumed after its pause: %q", got)
	}
	back, err := rt.Restore(ctx, p.ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatalf("restoring the durable checkpoint taken over a cancel: %v", err)
	}
	defer back.Close()
	if got := out(t, back, probe); got != want {
		t.Fatalf("restored from the durable checkpoint: %q, want %q", got, want)
	}
}

// Stats, an inspection, does not make a durable checkpoint yield (durable.go,
// checkpointYield.cancel): one that arrives while the checkpoint is taken waits for it, and the
// checkpoint completes.
func TestDurableCheckpointDoesNotYieldToStats(t *testing.T) {
	rt, s := durableSession(t, Options{}, "import numpy as np\na = np.arange(4_000_000, dtype=np.int64)")
	ctx := context.Background()
	done := checkpointAsync(ctx, s, "y1")
	untilCheckpointRuns(t, s, done) // the sandbox held, the checkpoint cancellable
	st, _, err := s.Stats(ctx)
	if err != nil || st == nil {
		t.Fatalf("Stats during the checkpoint: %+v %v", st, err)
	}
	if checkpointRunning(s) {
		t.Fatal("Stats answered while the checkpoint's runsc ran: it did not wait for the checkpoint")
	}
	p := receive(t, done, "the checkpoint did not end")
	if p.err != nil || p.ref.Ref == "" {
		t.Fatalf("the checkpoint that Stats arrived during: %+v %v, want it taken", p.ref, p.err)
	}
	if c := rt.DurableCosts(); c.Yields != 0 || c.Count != 1 {
		t.Fatalf("%d checkpoints yielded, %d taken; want none, one", c.Yields, c.Count)
	}
}

// lines collects a command's output.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(_ sandbox.Stream, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A file write, a file read, a command and a rewind that arrive while the latest step's durable
// checkpoint holds the sandbox cancel it as a run does (durable.go's checkpointYield): each gets
// its answer before the checkpoint, taken again at the session's next quiet moment (after a
// command's end), has ended, and a session restored from that checkpoint holds the step's state,
// not the write's.
func TestDurableCheckpointWithFilesAndACommandArriving(t *testing.T) {
	rt := ttRuntime(t, Options{DurableQuiet: 50 * time.Millisecond})
	ctx := context.Background()
	s := ttSession(t, rt)
	out(t, s, "import numpy as np\na = np.arange(4_000_000, dtype=np.int64)\nsum0 = int(a.sum())\nx = 0")
	const f = "/home/user/f.txt"
	// command runs sh -c line in the session and returns its output.
	command := func(line string) (string, error) {
		var o lines
		p, err := s.StartCommand(ctx, sandbox.CommandSpec{Argv: []string{"sh", "-c", line}, Dir: "/home/user"}, &o)
		if err != nil {
			return "", err
		}
		select {
		case <-p.Done():
		case <-time.After(2 * time.Minute):
			return "", errors.New("the command did not end within 2 minutes")
		}
		if code, status, err := p.Exit(); code != 0 || err != nil {
			return "", fmt.Errorf("%s %v", status, err)
		}
		return o.String(), nil
	}
	atStep := func(n int) string { return fmt.Sprintf("step %d", n) }
	ops := []struct {
		name string
		// do is the request; want what it answers at step n.
		do   func(n int) (string, error)
		want func(n int) string
		// live is f's content in the live session afterwards.
		live func(n int) string
	}{
		{"write", func(n int) (string, error) { return "", s.WriteFile(ctx, f, []byte("written")) },
			func(int) string { return "" }, func(int) string { return "written" }},
		{"read", func(n int) (string, error) { b, err := s.ReadFile(ctx, f); return string(b), err }, atStep, atStep},
		{"command", func(n int) (string, error) { return command("cat " + f) }, atStep, atStep},
		// A command that outlasts DurableQuiet: the checkpoint taken again waits for its end
		// instead of being refused for it.
		{"slow command", func(n int) (string, error) { return command("sleep 0.4; cat " + f) }, atStep, atStep},
		{"rewind", func(n int) (string, error) { return "", s.Rewind(ctx, fmt.Sprintf("st_%d", n), "") },
			func(int) string { return "" }, atStep},
	}
	n := 0
	for _, op := range ops {
		for try := 1; ; try++ {
			n++
			step := fmt.Sprintf("st_%d", n)
			out(t, s, fmt.Sprintf("a = np.arange(4_000_000, dtype=np.int64)\nx = %d\nopen(%q, 'w').write('step %d')", n, f, n))
			if err := s.Snapshot(ctx, step); err != nil {
				t.Fatal(err)
			}
			done, yields := persistUntilHeld(ctx, t, rt, s, step)
			answer := send(func() (string, error) { return op.do(n) })
			p := receive(t, done, "the durable checkpoint did not end")
			a := receive(t, answer, fmt.Sprintf("the %s that arrived during the checkpoint got no answer", op.name))
			if a.err != nil || a.out != op.want(n) {
				t.Fatalf("the %s that arrived during the checkpoint: %q %v, want %q", op.name, a.out, a.err, op.want(n))
			}
			if p.err != nil || p.ref.Ref == "" {
				t.Fatalf("the step was not made durable: %+v %v", p.ref, p.err)
			}
			if rt.DurableCosts().Yields == yields {
				if try == 5 {
					t.Fatalf("in 5 tries the %s never cancelled the checkpoint", op.name)
				}
				t.Logf("%s, try %d: the checkpoint ended before the %s cancelled it; again", op.name, try, op.name)
				continue
			}
			if !a.at.Before(p.at) {
				t.Fatalf("the %s's answer (%v) came after the checkpoint ended (%v): it waited for it", op.name, a.at, p.at)
			}
			c := rt.DurableCosts()
			t.Logf("%s, try %d: it took %v; the cancel %v, the checkpoint taken again held the session %v",
				op.name, try, a.took, c.YieldCost[len(c.YieldCost)-1], c.Held[len(c.Held)-1])
			if got, err := s.ReadFile(ctx, f); err != nil || string(got) != op.live(n) {
				t.Fatalf("the live session's file after the %s: %q %v, want %q", op.name, got, err, op.live(n))
			}
			back, err := rt.Restore(ctx, p.ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("0 %d step %d\n", n, n)
			got := out(t, back, fmt.Sprintf("print(int(a.sum()) - sum0, x, open(%q).read())", f))
			back.Close()
			if got != want {
				t.Fatalf("restored from the checkpoint taken again after the %s: %q, want %q", op.name, got, want)
			}
			break
		}
	}
}

// persisted is what a Persist returned, and when.
type persisted struct {
	ref sandbox.SnapshotRef
	err error
	at  time.Time
}

// persistUntilHeld starts Persist of step and returns once its checkpoint holds the sandbox (the
// box's gate up: a request sent now arrives during the checkpoint), with the session's yields
// counted before it.
func persistUntilHeld(ctx context.Context, t *testing.T, rt *Runtime, s *session, step string) (<-chan persisted, int) {
	t.Helper()
	yields := rt.DurableCosts().Yields
	done := persistAsync(ctx, s, step)
	waitFor(t, "the durable checkpoint did not start", func() bool { return gateUp(s) })
	return done, yields
}

// gateUp says whether the session's sandbox holds requests back (box.quiesce: a checkpoint).
func gateUp(s *session) bool {
	b := s.boxNow()
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gate != nil
}
