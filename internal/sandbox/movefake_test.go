package sandbox_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The fixture of the session-move tests (move_test.go): two fake tiers whose sessions remember
// what they ran, a router that reads a few words, and the Manager that joins them.

// moveTier returns a fake of tier whose runs answer each code with answer(code), or with
// "tier:code" that took 1 s when answer gives nil. A session run holds its session for 1 ms, so
// runs that overlap are seen. The fake's sessions remember what they ran; heavy's have files.
func moveTier(tier sandbox.Tier, answer func(code string) *sandbox.Result, images []sandbox.ImageInfo) *runtimetest.Fake {
	f := tierFake(tier)
	f.Catalog = images
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		if s != nil {
			time.Sleep(time.Millisecond)
		}
		res := &sandbox.Result{Stdout: string(tier) + ":" + req.Code, Timing: sandbox.Timing{Total: time.Second}}
		if answer != nil {
			if r := answer(req.Code); r != nil {
				res = r
			}
		}
		res.Runtime = tier
		return res, nil
	}
	return f
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
	nano, heavy *runtimetest.Fake
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
		nano:  moveTier(tierNano, nanoAnswers, nil),
		heavy: moveTier(tierHeavy, answer, datascience),
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Router: pandasRouter, Runtimes: []sandbox.Runtime{
		f.nano, f.heavy}})
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
	if ns := f.nano.Sessions(); len(ns) != 1 || !ns[0].Closed() {
		t.Errorf("the nano sandbox was not closed")
	}
	hs := f.heavy.Sessions()
	if len(hs) != 1 {
		t.Fatalf("%d heavy sandboxes, want 1", len(hs))
	}
	if got := hs[0].Codes(); !slices.Equal(got, want) {
		t.Errorf("heavy ran %q, want %q", got, want)
	}
}
