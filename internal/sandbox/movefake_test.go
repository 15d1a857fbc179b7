package sandbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The fakes of the session-move tests (move_test.go): two tiers whose sessions remember what
// they ran, a router that reads a few words, and the Manager that joins them.

// moveTier is a runtime whose sessions answer each code with answer(code), and remember what
// they ran, files included. Its sessions of the heavy tier also have files. NewSession waits on
// gate when it is set, and fails with failNew.
type moveTier struct {
	tier    sandbox.Tier
	answer  func(code string) *sandbox.Result
	images  []sandbox.ImageInfo
	gate    chan struct{}
	started chan struct{} // receives when NewSession is called, if set
	failNew error

	mu       sync.Mutex
	sessions []*moveSession
}

type moveSession struct {
	rt *moveTier

	mu     sync.Mutex
	codes  []string
	reqs   []sandbox.RunRequest
	files  map[string][]byte
	closed bool
	// running counts runs in progress, to catch two at once.
	running, overlap int
}

// Interface guards.
var (
	_ sandbox.Runtime      = (*moveTier)(nil)
	_ sandbox.Catalog      = (*moveTier)(nil)
	_ sandbox.Explainer    = (*moveTier)(nil)
	_ sandbox.Session      = (*moveSession)(nil)
	_ sandbox.SessionFiles = (*moveSession)(nil)
)

func (f *moveTier) Capabilities() sandbox.Capabilities { return capsOf(f.tier) }
func (f *moveTier) Cannot(res *sandbox.Result, err error) (sandbox.Need, bool) {
	return explain(f.tier, res, err)
}
func (f *moveTier) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	res := f.result(req.Code)
	return res, nil
}
func (f *moveTier) result(code string) *sandbox.Result {
	res := &sandbox.Result{Stdout: string(f.tier) + ":" + code, Timing: sandbox.Timing{Total: time.Second}}
	if f.answer != nil {
		if r := f.answer(code); r != nil {
			res = r
		}
	}
	res.Runtime = f.tier
	return res
}
func (f *moveTier) NewSession(ctx context.Context, _ sandbox.SessionOptions) (sandbox.Session, error) {
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.failNew != nil {
		return nil, f.failNew
	}
	s := &moveSession{rt: f, files: map[string][]byte{}}
	f.mu.Lock()
	f.sessions = append(f.sessions, s)
	f.mu.Unlock()
	return s, nil
}
func (f *moveTier) Close() error                { return nil }
func (f *moveTier) Images() []sandbox.ImageInfo { return f.images }
func (f *moveTier) made() []*moveSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sessions)
}

func (s *moveSession) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.KindConflict, "session closed")
	}
	s.running++
	if s.running > 1 {
		s.overlap++
	}
	s.codes = append(s.codes, req.Code)
	s.reqs = append(s.reqs, *req)
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return s.rt.result(req.Code), nil
}
func (s *moveSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
func (s *moveSession) ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.codes)
}
func (s *moveSession) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
func (s *moveSession) WriteFile(_ context.Context, p string, b []byte) error {
	if s.rt.tier != tierHeavy {
		return errors.New("no files")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = b
	return nil
}
func (s *moveSession) ReadFile(_ context.Context, p string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[p]
	if !ok {
		return nil, sandbox.ErrNotFound
	}
	return b, nil
}
func (s *moveSession) ListFiles(context.Context, string) ([]sandbox.FileInfo, error) {
	return nil, nil
}
func (s *moveSession) RemoveFile(context.Context, string) error { return nil }

// nanoSession hides the fake's file operations, as nano's sessions have none.
type nanoOnly struct{ *moveTier }

func (n nanoOnly) NewSession(ctx context.Context, o sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := n.moveTier.NewSession(ctx, o)
	if err != nil {
		return nil, err
	}
	return struct{ sandbox.Session }{s}, nil
}

// nanoAnswers answers like nano's interpreter for the codes of these tests.
func nanoAnswers(code string) *sandbox.Result {
	fail := func(name, value, tb string) *sandbox.Result {
		return &sandbox.Result{ExitCode: 1, Stdout: "partial\n", Timing: sandbox.Timing{Total: 2 * time.Second},
			Error: &sandbox.PyError{Name: name, Value: value, Traceback: tb}}
	}
	switch {
	case strings.Contains(code, "__import__"):
		return fail("ModuleNotFoundError", "No module named 'pandas'", "")
	case strings.Contains(code, "Thread"):
		return fail("RuntimeError", "can't start new thread", "")
	case strings.Contains(code, "lookalike"):
		return fail("RuntimeError", "can't start new thread: the pool is full", "")
	case strings.Contains(code, "subprocess"):
		return fail("OSError", "[Errno 58] wasi does not support processes.", "")
	case strings.Contains(code, "os.system"):
		return fail("AttributeError", "module 'os' has no attribute 'system'", "")
	case strings.Contains(code, "asyncio.run"):
		return fail("OSError", "[Errno 58] Not supported", "Traceback (most recent call last):\n"+
			"  File \"/usr/local/lib/python311.zip/socket.py\", line 631, in socketpair\n"+
			"  File \"/usr/local/lib/python311.zip/socket.py\", line 232, in __init__\nOSError: [Errno 58] Not supported\n")
	case strings.Contains(code, "os.chown"):
		return fail("OSError", "[Errno 58] Not supported", "Traceback (most recent call last):\n"+
			"  File \"<string>\", line 1, in <module>\nOSError: [Errno 58] Not supported\n")
	case strings.Contains(code, "gethostname"):
		return fail("AttributeError", "module 'socket' has no attribute 'gethostname'", "")
	case strings.Contains(code, "1/0"):
		return fail("ZeroDivisionError", "division by zero", "")
	}
	return nil
}

// pandasRouter routes code that says pandas or Thread to heavy, "import helper" to heavy as a
// guess, and everything else to nano.
var pandasRouter = routerFunc(func(req *sandbox.RunRequest) (sandbox.Decision, error) {
	switch {
	case req.Tier == tierNano:
		return sandbox.Decision{Tier: tierNano, Reasons: []string{"nano: runtime requested"}}, nil
	case strings.Contains(req.Code, "import pandas"):
		return sandbox.Decision{Tier: tierHeavy, Reasons: []string{"heavy: imports pandas (not in nano; in image python-datascience)"}}, nil
	case strings.Contains(req.Code, "ThreadPoolExecutor"):
		return sandbox.Decision{Tier: tierHeavy, Reasons: []string{"heavy: uses threads (concurrent.futures), which nano cannot start"}}, nil
	case strings.Contains(req.Code, "import helper"):
		return sandbox.Decision{Tier: tierHeavy, Reasons: []string{"heavy: imports helper (not in nano nor in any image)"}, Guess: true}, nil
	}
	return sandbox.Decision{Tier: tierNano, Reasons: []string{"nano: no imports"}}, nil
})

type moveFixture struct {
	m           *sandbox.Manager
	nano, heavy *moveTier
}

// heavyAnswers answers like heavy's interpreter: only plain exceptions.
func heavyAnswers(code string) *sandbox.Result {
	if strings.Contains(code, "1/0") {
		return &sandbox.Result{ExitCode: 1, Error: &sandbox.PyError{Name: "ZeroDivisionError", Value: "division by zero"}}
	}
	return nil
}

// newMoveFixture makes a Manager with both tiers; heavyAnswer, when set, answers before
// heavyAnswers.
func newMoveFixture(t *testing.T, heavyAnswer func(string) *sandbox.Result) *moveFixture {
	t.Helper()
	answer := heavyAnswers
	if first := heavyAnswer; first != nil {
		answer = func(code string) *sandbox.Result {
			if r := first(code); r != nil {
				return r
			}
			return heavyAnswers(code)
		}
	}
	f := &moveFixture{
		nano:  &moveTier{tier: tierNano, answer: nanoAnswers},
		heavy: &moveTier{tier: tierHeavy, answer: answer, images: datascience},
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Router: pandasRouter, Runtimes: []sandbox.Runtime{
		nanoOnly{f.nano}, f.heavy}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	f.m = m
	return f
}

// session creates a session with runtime tier and runs codes in it, each expected to stay where
// it is.
func (f *moveFixture) session(t *testing.T, tier sandbox.Tier, codes ...string) string {
	t.Helper()
	info, err := f.m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: tier, Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		res, err := f.m.RunInSession(context.Background(), info.ID, &sandbox.RunRequest{Code: c})
		if err != nil || res.Runtime != tierNano {
			t.Fatalf("run %q: %+v %v", c, res, err)
		}
	}
	return info.ID
}

func (f *moveFixture) run(t *testing.T, id, code string) (*sandbox.Result, error) {
	t.Helper()
	return f.m.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: code, Limits: sandbox.Limits{Timeout: 10 * time.Second}})
}

// checkMoved checks the session is heavy now, with the nano sandbox closed and the heavy one
// having run want.
func (f *moveFixture) checkMoved(t *testing.T, id string, want ...string) {
	t.Helper()
	info, err := f.m.Session(id)
	if err != nil || info.Tier != tierHeavy || info.MovedFrom != tierNano {
		t.Errorf("session %+v %v, want heavy moved from nano", info, err)
	}
	if ns := f.nano.made(); len(ns) != 1 || !ns[0].isClosed() {
		t.Errorf("the nano sandbox was not closed")
	}
	hs := f.heavy.made()
	if len(hs) != 1 {
		t.Fatalf("%d heavy sandboxes, want 1", len(hs))
	}
	if got := hs[0].ran(); !slices.Equal(got, want) {
		t.Errorf("heavy ran %q, want %q", got, want)
	}
}
