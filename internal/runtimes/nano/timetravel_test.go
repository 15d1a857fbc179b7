package nano

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Time travel with real nano, through the Manager that records the steps: snapshots per step,
// rewind, fork, pause/resume, storage, restart, timeouts and inspection.

type ttEnv struct {
	t     *testing.T
	dir   string
	store *snapstore.Store
	rt    *Runtime
	m     *sandbox.Manager
}

// newTTEnv starts nano and a Manager keeping sessions and snapshots under dir.
func newTTEnv(t *testing.T, dir string) *ttEnv {
	t.Helper()
	store, err := snapstore.Open(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := New(context.Background(), Options{Artifacts: artifacts(t), Workers: 1, Warm: 1, SessionWarm: 1, Snapshots: store})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, StateDir: filepath.Join(dir, "sessions"), Snapshots: store})
	if err != nil {
		rt.Close()
		t.Fatal(err)
	}
	e := &ttEnv{t: t, dir: dir, store: store, rt: rt, m: m}
	t.Cleanup(func() { m.Close() })
	return e
}

// newMemTTEnv is a session runtime and Manager with no store: every step stays in memory, the
// daemon's copy of those the worker no longer keeps included.
func newMemTTEnv(t *testing.T) *ttEnv {
	t.Helper()
	rt, err := New(context.Background(), Options{Artifacts: artifacts(t), Workers: 1, Warm: 1, SessionWarm: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}})
	if err != nil {
		rt.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &ttEnv{t: t, rt: rt, m: m}
}

func (e *ttEnv) session() string {
	e.t.Helper()
	info, err := e.m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: Tier})
	if err != nil {
		e.t.Fatal(err)
	}
	return info.ID
}

func (e *ttEnv) run(id, code string) *sandbox.Result {
	e.t.Helper()
	res, err := e.m.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: code})
	if err != nil {
		e.t.Fatalf("run %q: %v", code, err)
	}
	if res.Error != nil {
		e.t.Fatalf("run %q raised %s: %s", code, res.Error.Name, res.Error.Value)
	}
	return res
}

// durable waits until every step of the session has a durable snapshot.
func (e *ttEnv) durable(id string) []sandbox.Step {
	e.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		steps, _, err := e.m.Steps(id)
		if err != nil {
			e.t.Fatal(err)
		}
		done := true
		for _, st := range steps {
			if st.Snapshot.State != sandbox.SnapshotDurable {
				done = false
				if st.Snapshot.State == sandbox.SnapshotDropped {
					e.t.Fatalf("step %s: snapshot dropped: %s", st.ID, st.Snapshot.Reason)
				}
			}
		}
		if done {
			return steps
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("snapshots not durable after 30s: %+v", steps)
		}
	}
}

// state is what the tests read of a session: its variables and its file.
const stateCode = `import json, os
p = "/home/user/notes.txt"
print(json.dumps({"n": n, "hist": hist, "file": open(p).read() if os.path.exists(p) else None}))`

type state struct {
	N    int     `json:"n"`
	Hist []int   `json:"hist"`
	File *string `json:"file"`
}

func (e *ttEnv) state(id string) state {
	e.t.Helper()
	var s state
	out := e.run(id, stateCode).Stdout
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		e.t.Fatalf("state: %v: %q", err, out)
	}
	return s
}

// stepCode is step k: it changes variables and the file.
func stepCode(k int) string {
	if k == 1 {
		return "n = 1\nhist = [1]\nopen('/home/user/notes.txt', 'w').write('step 1\\n')"
	}
	return fmt.Sprintf("n = %d\nhist.append(%d)\nopen('/home/user/notes.txt', 'a').write('step %d\\n')", k, k, k)
}

func wantState(t *testing.T, got state, k int) {
	t.Helper()
	var hist []int
	file := ""
	for i := 1; i <= k; i++ {
		hist = append(hist, i)
		file += fmt.Sprintf("step %d\n", i)
	}
	if got.N != k || fmt.Sprint(got.Hist) != fmt.Sprint(hist) || got.File == nil || *got.File != file {
		t.Fatalf("state %+v (file %q), want that of step %d", got, deref(got.File), k)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// After 5 steps, rewinding to step 2 shows step 2's variables and file exactly, and new code
// runs from there as a branch; a fork from step 3 and the original then go on independently.
func TestRewindAndFork(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	id := e.session()
	var ids []string
	for k := 1; k <= 5; k++ {
		res := e.run(id, stepCode(k))
		if res.Step == "" {
			t.Fatalf("step %d: the result names no step", k)
		}
		ids = append(ids, res.Step)
	}
	steps := e.durable(id)
	if len(steps) != 5 || steps[1].Parent != steps[0].ID || steps[4].ID != ids[4] {
		t.Fatalf("steps: %+v", steps)
	}
	if _, err := e.m.Rewind(context.Background(), id, ids[1]); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.state(id), 2) // this read is itself a step, a child of step 2
	steps, head, _ := e.m.Steps(id)
	if last := steps[len(steps)-1]; last.Parent != ids[1] || head != last.ID {
		t.Fatalf("after the rewind the next step's parent is %s (head %s), want %s", last.Parent, head, ids[1])
	}
	e.run(id, "n = 20\nhist.append(20)")

	fork, err := e.m.Fork(context.Background(), id, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if fork.ForkedFrom != id+"/"+ids[2] {
		t.Fatalf("fork: %+v", fork)
	}
	wantState(t, e.state(fork.ID), 3)
	e.run(fork.ID, "n = 30\nhist.append(30)\nopen('/home/user/notes.txt', 'a').write('fork\\n')")
	e.run(id, "n = 21\nhist.append(21)")
	f, o := e.state(fork.ID), e.state(id)
	if f.N != 30 || fmt.Sprint(f.Hist) != "[1 2 3 30]" || deref(f.File) != "step 1\nstep 2\nstep 3\nfork\n" {
		t.Fatalf("fork: %+v %q", f, deref(f.File))
	}
	if o.N != 21 || fmt.Sprint(o.Hist) != "[1 2 20 21]" || deref(o.File) != "step 1\nstep 2\n" {
		t.Fatalf("original: %+v %q", o, deref(o.File))
	}
	// Rewinding the original to its step 5, which the fork never saw, brings it back whole.
	e.durable(id)
	if _, err := e.m.Rewind(context.Background(), id, ids[4]); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.state(id), 5)
}

// Ten steps that each change 1 MiB store less than 3x one full snapshot of the session.
func TestSnapshotStorageIsIncremental(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	id := e.session()
	e.run(id, "import random\nr = random.Random(7)\nblocks = []")
	for k := 0; k < 10; k++ {
		e.run(id, "blocks.append(r.randbytes(1 << 20))")
	}
	steps := e.durable(id)
	used := e.store.Usage().Bytes

	// One full snapshot of the final state, alone in a store of its own.
	full, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blob, _, err := e.rt.load(steps[len(steps)-1].Snapshot.Ref)
	if err != nil {
		t.Fatal(err)
	}
	saved := e.rt.opts.Snapshots
	e.rt.opts.Snapshots = full
	ref, _, _, err := e.rt.persist(blob, nil, nil, nil)
	e.rt.opts.Snapshots = saved
	if err != nil {
		t.Fatal(err)
	}
	one := full.Usage().Bytes
	t.Logf("11 steps stored %d bytes; one full snapshot %d bytes (%.2fx); last step added %d bytes",
		used, one, float64(used)/float64(one), steps[len(steps)-1].Snapshot.Bytes)
	if ref.Ref == "" || used >= 3*one {
		t.Fatalf("10 steps of 1 MiB each stored %d bytes, not under 3x one full snapshot (%d bytes)", used, one)
	}
}

// Ten pause/resume cycles of one session lose nothing; a run after a pause resumes by itself.
func TestPauseResumeCycles(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	id := e.session()
	e.run(id, stepCode(1))
	for k := 2; k <= 11; k++ {
		info, err := e.m.Pause(context.Background(), id)
		if err != nil {
			t.Fatalf("pause %d: %v", k-1, err)
		}
		if info.State != sandbox.SessionPaused {
			t.Fatalf("pause %d: state %q", k-1, info.State)
		}
		if k%2 == 0 {
			if _, err := e.m.Resume(context.Background(), id); err != nil {
				t.Fatalf("resume %d: %v", k-1, err)
			}
		}
		e.run(id, stepCode(k))
		wantState(t, e.state(id), k)
	}
}

// A restarted daemon (a new Manager and runtime on the same directories) finds a live and a
// paused session and answers their next runs with their state.
func TestSessionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	e := newTTEnv(t, dir)
	live, paused := e.session(), e.session()
	for k := 1; k <= 3; k++ {
		e.run(live, stepCode(k))
		e.run(paused, stepCode(k))
	}
	e.durable(live)
	if _, err := e.m.Pause(context.Background(), paused); err != nil {
		t.Fatal(err)
	}
	e.m.Close()

	e2 := newTTEnv(t, dir)
	for _, id := range []string{live, paused} {
		info, err := e2.m.Session(id)
		if err != nil {
			t.Fatalf("session %s after the restart: %v", id, err)
		}
		if info.Steps != 3 {
			t.Fatalf("session %s: %d steps after the restart", id, info.Steps)
		}
		wantState(t, e2.state(id), 3)
		e2.run(id, stepCode(4))
		wantState(t, e2.state(id), 4)
	}
}

// A nano session whose run has to be killed at its deadline comes back at the step before.
func TestTimeoutComesBackAtStepBefore(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	id := e.session()
	e.run(id, stepCode(1))
	e.run(id, stepCode(2))
	e.durable(id)
	_, err := e.m.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: "n = 99\n" + ignoreInterrupt,
		Limits: sandbox.Limits{Timeout: 500 * time.Millisecond}})
	if !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if !strings.Contains(err.Error(), "back at its state before this run") {
		t.Fatalf("the timeout does not say the session is back: %v", err)
	}
	wantState(t, e.state(id), 2)
}

// Inspecting a step holding large values is bounded: reprs are cut, the live session untouched.
func TestInspectIsBounded(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	id := e.session()
	e.run(id, "big = list(range(1_000_000))\ntext = 'x' * 10_000_000\nn = 1\nopen('/home/user/a.bin', 'wb').write(bytes(5_000_000))")
	e.run(id, "n = 2\ndel text")
	steps := e.durable(id)
	start := time.Now()
	in, err := e.m.InspectStep(context.Background(), id, steps[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	b, _ := json.Marshal(in)
	vars := map[string]sandbox.Variable{}
	for _, v := range in.Variables {
		vars[v.Name] = v
	}
	if vars["n"].Repr != "1" || vars["text"].Type != "str" || len(vars["text"].Repr) > 300 || len(vars["big"].Repr) > 300 ||
		vars["big"].Size < 4_000_000 {
		t.Fatalf("variables: %+v", in.Variables)
	}
	if len(in.Files) != 1 || in.Files[0].Size != 5_000_000 || in.Files[0].SHA256 != "" {
		t.Fatalf("files: %+v", in.Files)
	}
	if len(b) > 64<<10 || took > 15*time.Second {
		t.Fatalf("inspection of %d bytes took %v", len(b), took)
	}
	d, err := e.m.DiffSteps(context.Background(), id, steps[0].ID, steps[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Removed) != 1 || d.Removed[0].Name != "text" || len(d.Changed) != 1 || d.Changed[0].Name != "n" {
		t.Fatalf("diff: %+v", d)
	}
	if got := e.run(id, "print(n, 'text' in globals())").Stdout; got != "2 False\n" {
		t.Fatalf("the live session changed under the inspection: %q", got)
	}
}

// A session's environment is in its interpreter's memory, and so in the snapshots kept for
// rewinds, but never in a snapshot written to the store: a durable step and a pause hold none of
// its values. The session's next run is given them again.
func TestDurableSnapshotsHoldNoSecrets(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	const token = "tok-3f9a1c77e2b54d08a6"
	info, err := e.m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: Tier, Env: map[string]string{"AGENT_TOKEN": token}})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	e.run(id, "import os\nkept = os.environ['AGENT_TOKEN'] * 2\nopen('/home/user/token.txt', 'w').write(kept)")
	steps := e.durable(id)
	sec := []byte(token)
	refs := []string{steps[0].Snapshot.Ref}
	// The file the code wrote holds the token twice: without the scrub it is in the store.
	if _, err := e.m.Pause(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		parts, _, err := e.rt.load(ref)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(parts.Bytes(), sec) {
			t.Errorf("the durable snapshot %s holds the session's token in its memory", ref)
		}
		for _, f := range parts.Files {
			if bytes.Contains(f.Data, sec) {
				t.Errorf("the durable snapshot %s holds the session's token in %s", ref, f.Path)
			}
		}
	}
	// Every blob of the store, decompressed where it is a page pack: none holds the token.
	filepath.WalkDir(filepath.Join(e.dir, "snapshots"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if dec, derr := decompress(b); derr == nil {
			b = dec
		}
		if bytes.Contains(b, sec) {
			t.Errorf("%s holds the session's token", p)
		}
		return nil
	})
	// The session goes on: its next run is given its environment again.
	if out := e.run(id, "import os\nprint(os.environ['AGENT_TOKEN'] == "+strconv.Quote(token)+")").Stdout; out != "True\n" {
		t.Errorf("after a resume the run sees its environment: %q", out)
	}
}

// A rewind in place is sent to the worker and not waited for: whatever the session does next
// sees the step's state. A step the worker no longer keeps (it keeps its last few) is made from
// the daemon's copy when the worker says so, before the next run; a rewind right after another
// and a pause right after a rewind see the rewound state too.
func TestRewindNotWaitedFor(t *testing.T) {
	e := newMemTTEnv(t)
	id := e.session()
	var ids []string
	for k := 1; k <= 6; k++ {
		ids = append(ids, e.run(id, stepCode(k)).Step)
	}
	ctx := context.Background()
	// Step 1: the daemon holds it (no store: every step stays in memory), the worker no more.
	if _, err := e.m.Rewind(ctx, id, ids[0]); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.state(id), 1)
	if _, err := e.m.Rewind(ctx, id, ids[4]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rewind(ctx, id, ids[3]); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.state(id), 4)

	// With a store: a pause right behind a rewind keeps the rewound state.
	d := newTTEnv(t, t.TempDir())
	id = d.session()
	ids = nil
	for k := 1; k <= 3; k++ {
		ids = append(ids, d.run(id, stepCode(k)).Step)
	}
	d.durable(id)
	if _, err := d.m.Rewind(ctx, id, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := d.m.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.m.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantState(t, d.state(id), 2)
}

// A jailed session worker's step snapshots come through memory it shares with the daemon
// (wire.Ring), not its pipe, their pages named in its page slots, and rewinds to them hold: the
// steps' states come back exactly.
func TestStepSnapshotsInSharedMemory(t *testing.T) {
	e := newMemTTEnv(t)
	id := e.session()
	var ids []string
	for k := 1; k <= 6; k++ {
		ids = append(ids, e.run(id, stepCode(k)).Step)
	}
	// The first step's snapshot is asked for (the session's steps ride on their runs once the
	// Manager took one); the last one's frame may still be on its way.
	fromRing := func() (n int64) {
		e.rt.mu.Lock()
		defer e.rt.mu.Unlock()
		for s := range e.rt.held {
			s.mu.Lock()
			if s.p != nil {
				n += s.p.fromRing.Load()
			}
			s.mu.Unlock()
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); fromRing() < 5; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d step snapshots came through shared memory, want the 5 that rode on their runs", fromRing())
		}
	}
	// Their changed pages were named in the worker's page slots, not carried in the frames.
	e.rt.mu.Lock()
	var fromSlots int64
	for s := range e.rt.held {
		s.mu.Lock()
		if s.p != nil {
			fromSlots += s.p.fromSlots.Load()
		}
		s.mu.Unlock()
	}
	e.rt.mu.Unlock()
	if fromSlots == 0 {
		t.Fatal("no page of the step snapshots came from the worker's page slots")
	}
	// Step 2 from the daemon's copies (the worker keeps only its last few), then step 5 in place.
	ctx := context.Background()
	if _, err := e.m.Rewind(ctx, id, ids[1]); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.state(id), 2)
	if _, err := e.m.Rewind(ctx, id, ids[4]); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.state(id), 5)
}
