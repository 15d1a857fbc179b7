package heavy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"sync/atomic"
)

// waitWarm waits until the pool holds n warm sandboxes. It gives up at once when the pool keeps
// failing (an image whose guest is older than this tree never starts).
func waitWarm(t *testing.T, rt *Runtime, n int) PoolStats {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st := rt.PoolStats()
		if st.Warm >= n {
			return st
		}
		if st.FillFailures >= 3 {
			t.Fatalf("the pool cannot make warm sandboxes: %s", st.FillError)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not reach %d warm sandboxes: %+v", n, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// preloaded is what a session from the pool prints for preloadProbe: the preload is imported,
// nothing of it is bound in the session's namespace, matplotlib is not loaded, and the preload's
// objects are frozen (freezeCode).
const (
	preloadProbe = "import sys\nprint(all(m in sys.modules for m in ('numpy', 'pandas')), [n for n in ('numpy', 'pandas', 'np', 'pd') if n in globals()], 'matplotlib' in sys.modules, __import__('gc').get_freeze_count() > 0)\n"
	preloaded    = "True [] False True\n"
)

// A session from the warm pool has numpy and pandas imported and an empty namespace; once
// drained, the pool fills again, from the checkpoint.
func TestWarmPoolPreloadsAndRefills(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 2})
	l := limits(t, 30*time.Second)
	st := waitWarm(t, rt, 2)
	if !st.Template {
		t.Fatalf("no checkpoint to restore from: %s", st.TemplateInfo)
	}
	var sessions []sandbox.Session
	for i := 0; i < 3; i++ { // the third finds the pool empty (or one refilled in between)
		sessions = append(sessions, newSession(t, rt, l))
	}
	for i, s := range sessions {
		if got := mustRun(t, s, l, preloadProbe); got != preloaded {
			t.Errorf("session %d: %q, want %q", i, got, preloaded)
		}
	}
	if got := mustRun(t, sessions[0], l, "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).a.sum())\n"); got != "3\n" {
		t.Errorf("pandas in a pooled session: %q", got)
	}
	st = waitWarm(t, rt, 2)
	if st.Hits < 2 || st.FillRestored < 4 || st.FillBooted != 0 || st.RestoreFailures != 0 {
		t.Errorf("after draining the pool: %+v, want 2+ hits and 4+ sandboxes restored, none booted", st)
	}
	// A one-shot run from the pool: destroyed after, so nothing it does reaches the next one.
	res, err := rt.Run(context.Background(), &sandbox.RunRequest{Code: "import pandas\npandas.leaked = 1\nprint(pandas.__version__ != '')\n", Limits: l})
	if err != nil || res.Stdout != "True\n" || res.Timing.Pool != "warm" {
		t.Fatalf("one-shot run: %+v %v", res, err)
	}
	waitWarm(t, rt, 2)
	res, err = rt.Run(context.Background(), &sandbox.RunRequest{Code: "import pandas\nprint(hasattr(pandas, 'leaked'))\n", Limits: l})
	if err != nil || res.Stdout != "False\n" {
		t.Fatalf("the next one-shot run: %+v %v", res, err)
	}
	// matplotlib is not preloaded, so a run's own MPLBACKEND still chooses its backend.
	waitWarm(t, rt, 2)
	res, err = rt.Run(context.Background(), &sandbox.RunRequest{Code: "import matplotlib\nprint(matplotlib.get_backend())\n",
		Env: map[string]string{"MPLBACKEND": "svg"}, Limits: l})
	if err != nil || res.Stdout != "svg\n" || res.Timing.Pool != "warm" {
		t.Fatalf("a pooled run with MPLBACKEND=svg: %+v %v", res, err)
	}
	// The pool can be resized: shrunk at once, grown in the background.
	rt.SetWarm(0)
	if st := rt.PoolStats(); st.Warm != 0 || st.Size != 0 {
		t.Errorf("after SetWarm(0): %+v", st)
	}
	rt.SetWarm(3)
	waitWarm(t, rt, 3)
}

// Restored sandboxes run code, have files of their own and share no state: not variables, not
// files, not the random seeds their modules drew before the checkpoint.
func TestRestoredSandboxesAreSeparate(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 2})
	l := limits(t, 30*time.Second)
	waitWarm(t, rt, 2)
	a, b := newSession(t, rt, l), newSession(t, rt, l)
	for _, s := range []sandbox.Session{a, b} {
		if s.(*session).b.python == "" {
			t.Error("a restored sandbox does not know its Python version")
		}
	}
	ctx := context.Background()
	fa, fb := a.(sandbox.SessionFiles), b.(sandbox.SessionFiles)
	if err := fa.WriteFile(ctx, "mine.txt", []byte("a's")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, a, l, "secret = 'a'\nopen('/tmp/a.txt', 'w').write('a')\n")
	if got := mustRun(t, a, l, "print(secret, open('mine.txt').read(), open('/tmp/a.txt').read())\n"); got != "a a's a\n" {
		t.Errorf("a: %q", got)
	}
	if got := mustRun(t, b, l, "import os\nprint('secret' in globals(), os.path.exists('mine.txt'), os.path.exists('/tmp/a.txt'))\n"); got != "False False False\n" {
		t.Errorf("b sees a's state: %q", got)
	}
	if _, err := fb.ReadFile(ctx, "mine.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("b reads a's file: %v", err)
	}
	draw := "import random, numpy, tempfile\nprint(random.getrandbits(64), numpy.random.randint(1 << 62), next(tempfile._get_candidate_names()))\n"
	ra, rb := mustRun(t, a, l, draw), mustRun(t, b, l, draw)
	for i, fa := range strings.Fields(ra) {
		if fb := strings.Fields(rb); i < len(fb) && fa == fb[i] {
			t.Errorf("two restored sandboxes drew the same random value %d: %s", i, fa)
		}
	}
}

// A template that cannot be restored is logged, replaced by booted sandboxes (preloaded all the
// same), and dropped after a few failures in a row.
func TestRestoreFailureFallsBackToBoot(t *testing.T) {
	var logs syncBuffer
	rt := newTestRuntime(t, Options{Warm: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitWarm(t, rt, 1)
	rt.mu.Lock()
	t0 := rt.tpl
	rt.mu.Unlock()
	if t0 == nil {
		t.Fatal("no template")
	}
	// Break the checkpoint under the runtime's feet.
	if err := os.WriteFile(filepath.Join(t0.image(), "checkpoint.img"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := limits(t, 30*time.Second)
	for i := 0; i < maxRestoreFailures+1; i++ {
		s := newSession(t, rt, l) // the warm one, then misses: each a failed restore, then a boot
		mustRun(t, s, l, "print(1)\n")
		s.Close()
	}
	st := waitWarm(t, rt, 1)
	if st.RestoreFailures < maxRestoreFailures || st.Template || st.FillBooted == 0 {
		t.Fatalf("after broken restores: %+v", st)
	}
	if st.TemplateState != TemplateDropped || !strings.Contains(st.TemplateInfo, "checkpoint.img changed") {
		t.Errorf("a broken template is not reported as dropped, with why: %s: %s", st.TemplateState, st.TemplateInfo)
	}
	s := newSession(t, rt, l)
	if got := mustRun(t, s, l, preloadProbe); got != preloaded {
		t.Errorf("a booted warm sandbox: %q, want %q", got, preloaded)
	}
	if !strings.Contains(logs.String(), "booting one instead") {
		t.Errorf("the failed restores were not logged:\n%s", logs.String())
	}
}

// With NoRestore the pool boots and preloads every warm sandbox.
func TestWarmPoolWithoutRestore(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 1, NoRestore: true})
	l := limits(t, 30*time.Second)
	st := waitWarm(t, rt, 1)
	if st.Template || st.FillBooted != 1 {
		t.Fatalf("%+v", st)
	}
	s := newSession(t, rt, l)
	if got := mustRun(t, s, l, preloadProbe); got != preloaded {
		t.Errorf("%q, want %q", got, preloaded)
	}
}

func TestPreloadCode(t *testing.T) {
	code, err := preloadCode([]string{"numpy", "matplotlib.pyplot"})
	if err != nil || code != "__import__(\"numpy\")\n__import__(\"matplotlib.pyplot\")\n"+freezeCode {
		t.Errorf("%q %v", code, err)
	}
	for _, bad := range []string{"os; os.system('x')", "", "a..b", "1a"} {
		if _, err := preloadCode([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger used from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*syncBuffer)(nil)

// A restored sandbox is held to its memory limit like a booted one: its cgroup is its own, and the
// memory restored from the checkpoint counts toward it.
func TestRestoredSandboxMemoryLimit(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 1})
	l := limits(t, 30*time.Second)
	if st := waitWarm(t, rt, 1); !st.Template {
		t.Fatalf("no template: %s", st.TemplateInfo)
	}
	s := newSession(t, rt, l)
	b := s.(*session).b
	peak := b.cg.memoryPeak()
	t.Logf("memory peak of a restored sandbox before any cell: %d MiB", peak>>20)
	if peak < 30<<20 {
		t.Errorf("the restored sandbox's cgroup saw only %d MiB: is the restored memory charged to it?", peak>>20)
	}
	_, err := s.Run(context.Background(), &sandbox.RunRequest{Code: "keep = []\nwhile True:\n    keep.append(bytearray(16 << 20))\n", Limits: l})
	if !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("a hog in a restored sandbox: %v, want memory_limit", err)
	}
}

// Work that yields to a burst of claims (a step's snapshot) waits for the first answers of the
// sandboxes handed out just now, not for a session that was opened and left without a run.
func TestAfterFreshAnswers(t *testing.T) {
	rt := &Runtime{active: map[*box]bool{}, ctx: context.Background()}
	old := &box{answered: make(chan struct{}), claimedAt: time.Now().Add(-time.Minute)}
	rt.active[old] = true
	done := make(chan struct{})
	go func() { rt.afterFreshAnswers(10 * time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waited for a sandbox handed out a minute ago that never ran")
	}

	fresh := &box{answered: make(chan struct{}), claimedAt: time.Now()}
	rt.active[fresh] = true
	var answered atomic.Bool
	done = make(chan struct{})
	waiter := make(chan string, 1)
	go func() { waiter <- goroutineID(); rt.afterFreshAnswers(10 * time.Second); close(done) }()
	// The answer comes while the work waits for it (a fixed 50 ms here let a loaded machine start
	// the wait after the answer, which then rightly returned at once).
	waitBlockedIn(t, <-waiter, "(*Runtime).afterFreshAnswers")
	answered.Store(true)
	at := time.Now()
	fresh.markAnswered()
	select {
	case <-done:
		if !answered.Load() {
			t.Error("returned before the sandbox just handed out answered")
		}
		// The answer still goes through the daemon to its client: the work waits for that too.
		if d := time.Since(at); d < answerTravel {
			t.Errorf("returned %v after the answer, before answerTravel (%v)", d, answerTravel)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the sandbox answered")
	}
}

// goroutineID is the calling goroutine's number, as a goroutine dump spells it.
func goroutineID() string {
	buf := make([]byte, 64)
	f := strings.Fields(string(buf[:runtime.Stack(buf, false)])) // "goroutine 42 [running]:"
	return f[1]
}

// waitBlockedIn waits until goroutine id is blocked in a select inside fn (a function's name as
// a goroutine dump spells it), so a test acts on a waiter once it waits.
func waitBlockedIn(t *testing.T, id, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if head, _, _ := strings.Cut(g, "\n"); strings.HasPrefix(head, "goroutine "+id+" [select") && strings.Contains(g, fn+"(") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine waits in %s after 10 s", fn)
		}
	}
}

// In a burst the first sandboxes answer while later claims' cells still run: work that yields to
// the burst waits for those too, not only for the claims made before it began to wait.
func TestAfterFreshAnswersWaitsForLaterClaims(t *testing.T) {
	rt := &Runtime{active: map[*box]bool{}, ctx: context.Background()}
	first := &box{answered: make(chan struct{}), claimedAt: time.Now()}
	rt.active[first] = true
	done := make(chan struct{})
	go func() { rt.afterFreshAnswers(10 * time.Second); close(done) }()
	time.Sleep(20 * time.Millisecond)
	later := &box{answered: make(chan struct{}), claimedAt: time.Now()}
	rt.mu.Lock()
	rt.active[later] = true
	rt.mu.Unlock()
	first.markAnswered()
	select {
	case <-done:
		t.Fatal("returned while a sandbox claimed during the wait had not answered")
	case <-time.After(100 * time.Millisecond):
	}
	later.markAnswered()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after every claim answered")
	}

	// However many claims keep coming, the wait ends.
	stuck := &box{answered: make(chan struct{}), claimedAt: time.Now()}
	rt.mu.Lock()
	rt.active[stuck] = true
	rt.mu.Unlock()
	start := time.Now()
	rt.afterFreshAnswers(time.Hour)
	if waited := time.Since(start); waited > burstWait+2*time.Second {
		t.Errorf("waited %v for a sandbox that never answered; the bound is %v", waited, burstWait)
	}
}

// Work behind a burst waits until the burst's requests have gone quiet: the clients' next
// requests (closes, next runs) come only once their answers reached them, so while they come,
// answers may still be on their way through the daemon.
func TestAfterFreshAnswersWaitsForQuiet(t *testing.T) {
	rt := &Runtime{active: map[*box]bool{}, ctx: context.Background()}
	fresh := &box{answered: make(chan struct{}), claimedAt: time.Now()}
	rt.active[fresh] = true
	// The runtime's sessions busy until 150 ms from now (as if a close or a run came every
	// moment until then), stamped before the answer so that no wait can miss it.
	busy := time.Now().Add(150 * time.Millisecond)
	rt.activity.Store(busy.UnixNano())
	done := make(chan struct{})
	var returned time.Time
	waiter := make(chan string, 1)
	go func() {
		waiter <- goroutineID()
		rt.afterFreshAnswers(10 * time.Second)
		returned = time.Now()
		close(done)
	}()
	waitBlockedIn(t, <-waiter, "(*Runtime).afterFreshAnswers") // the answer comes while the work waits
	fresh.markAnswered()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the requests went quiet")
	}
	if returned.Before(busy.Add(answerTravel)) {
		t.Errorf("returned %v before the requests had been quiet for answerTravel (%v)", busy.Add(answerTravel).Sub(returned), answerTravel)
	}
}
