package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The router sends the code to heavy: the session moves before running it, replaying the earlier
// runs, and keeps its ID; later runs go to heavy.
func TestSessionMovesOnRouterDecision(t *testing.T) {
	f := newMoveFixture(t, nil)
	id := f.session(t, sandbox.TierAuto, "x = sum([1, 2, 3])", "y = x + 1")
	res, err := f.run(t, id, "import pandas as pd; print(pd.Series([x]).sum())")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"heavy: session moved from nano: the code imports pandas (not in nano; in image python-datascience); replayed 2 earlier runs"}
	if res.Runtime != tierHeavy || !slices.Equal(res.Routing.Reasons, want) || res.Routing.Tier != tierHeavy {
		t.Errorf("result %+v routing %+v, want heavy %q", res, res.Routing, want)
	}
	if res.Stdout != "heavy:import pandas as pd; print(pd.Series([x]).sum())" {
		t.Errorf("stdout %q: the replays' output must not show", res.Stdout)
	}
	f.checkMoved(t, id, "x = sum([1, 2, 3])", "y = x + 1", "import pandas as pd; print(pd.Series([x]).sum())")
	if got := f.nano.Sessions()[0].Codes(); len(got) != 2 {
		t.Errorf("nano ran %q, want the first two runs only", got)
	}
	// The replays ran with the session's environment, as the runs did.
	if r := f.heavy.Sessions()[0].Requests()[0]; r.Env["A"] != "1" || r.Tier != tierHeavy {
		t.Errorf("replay request %+v", r)
	}
	res, err = f.run(t, id, "print(y)")
	if err != nil || res.Runtime != tierHeavy || !slices.Equal(res.Routing.Reasons, []string{"heavy: session " + id}) {
		t.Errorf("next run: %+v %v", res, err)
	}
	if info, _ := f.m.Session(id); info.Runs != 4 {
		t.Errorf("runs = %d, want 4 (replays do not count)", info.Runs)
	}
}

// nano's interpreter meets what only heavy has, after the router let the code through: the
// session moves, and the code runs again in heavy with what nano left of its timeout.
func TestSessionMovesOnNanoError(t *testing.T) {
	tests := []struct {
		name, code, after string
	}{
		{"ModuleNotFoundError", "m = __import__('pan' + 'das')",
			"after ModuleNotFoundError: No module named 'pandas' in nano"},
		{"thread", "t = threading.Thread(target=f); t.start()",
			"after RuntimeError: can't start new thread in nano (nano cannot start threads)"},
		{"subprocess", "subprocess.run(['ls'])",
			"after OSError: [Errno 58] wasi does not support processes. in nano (nano cannot start subprocesses)"},
		{"os.system", "os.system('ls')",
			"after AttributeError: module 'os' has no attribute 'system' in nano (nano cannot start subprocesses)"},
		{"socket pair", "asyncio.run(main())",
			"after OSError: [Errno 58] Not supported in nano (nano cannot open sockets)"},
		{"socket function", "socket.gethostname()",
			"after AttributeError: module 'socket' has no attribute 'gethostname' in nano (nano cannot open sockets)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newMoveFixture(t, nil)
			id := f.session(t, "", "x = 1", "1/0")
			res, err := f.run(t, id, tc.code)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"nano: session " + id, "heavy: session moved from nano " + tc.after + "; replayed 2 earlier runs, then this run again"}
			if res.Runtime != tierHeavy || res.Error != nil || !slices.Equal(res.Routing.Reasons, want) {
				t.Errorf("result %+v routing %q\nwant heavy %q", res, res.Routing.Reasons, want)
			}
			// The run that raised in nano (1/0) raised in heavy too: that is a faithful replay.
			f.checkMoved(t, id, "x = 1", "1/0", tc.code)
			if r := f.heavy.Sessions()[0].Requests()[2]; r.Limits.Timeout != 8*time.Second {
				t.Errorf("heavy run's timeout %v, want the 8 s nano left", r.Limits.Timeout)
			}
		})
	}
}

// Errors that look like nano's refusals but are not, and modules no image has, leave the session
// on nano with the code's own error; so does a router's guess.
func TestSessionDoesNotMove(t *testing.T) {
	for _, code := range []string{
		"raise RuntimeError(\"can't start new thread: lookalike\")",
		"os.chown('a', 1, 1)", // ENOTSUP, but not from a socket
		"import helper",       // the router's guess: no tier has helper
		"1/0",
	} {
		t.Run(code, func(t *testing.T) {
			f := newMoveFixture(t, nil)
			id := f.session(t, sandbox.TierAuto, "x = 1")
			res, err := f.run(t, id, code)
			if err != nil || res.Runtime != tierNano || !slices.Equal(res.Routing.Reasons, []string{"nano: session " + id}) {
				t.Errorf("got %+v %v, want nano's own result", res, err)
			}
			if len(f.heavy.Sessions()) != 0 {
				t.Error("a heavy sandbox was started")
			}
		})
	}
}

// A replay that does not end as its run did in nano aborts the move: the heavy sandbox is
// closed, the nano session goes on as it was, and the error (a conflict) says which run failed.
func TestSessionMoveReplayFailureKeepsNano(t *testing.T) {
	heavy := func(code string) *sandbox.Result {
		if strings.Contains(code, "random") {
			return &sandbox.Result{ExitCode: 1, Error: &sandbox.PyError{Name: "ValueError", Value: "not the same"}}
		}
		return nil
	}
	for _, tc := range []struct{ name, code, prefix string }{
		{"before the run", "import pandas", "session %s could not move from nano to heavy: the code imports pandas"},
		{"after the run", "t = Thread(); t.start()", "session %s could not move from nano to heavy after RuntimeError: can't start new thread"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMoveFixture(t, heavy)
			id := f.session(t, sandbox.TierAuto, "x = 1", "r = random()", "y = 2")
			res, err := f.run(t, id, tc.code)
			e := sandbox.AsError(err)
			if res != nil || e == nil || e.Kind != sandbox.KindConflict || e.Hint == "" ||
				!strings.HasPrefix(e.Message, fmt.Sprintf(tc.prefix, id)) ||
				!strings.HasSuffix(e.Message, "replaying run 2 of 3 raised ValueError: not the same, where in nano it completed") {
				t.Fatalf("got %+v %v, want a conflict naming run 2", res, e)
			}
			if tc.name == "after the run" && (e.Result == nil || e.Result.Runtime != tierNano || e.Result.Error.Name != "RuntimeError") {
				t.Errorf("the error's result %+v, want nano's", e.Result)
			}
			info, _ := f.m.Session(id)
			if info.Tier != tierNano || info.MovedFrom != "" {
				t.Errorf("session %+v, want still nano", info)
			}
			hs := f.heavy.Sessions()
			if len(hs) != 1 || !hs[0].Closed() || f.nano.Sessions()[0].Closed() {
				t.Errorf("the heavy sandbox must be closed and the nano one open")
			}
			res, err = f.run(t, id, "print(x)")
			if err != nil || res.Runtime != tierNano {
				t.Errorf("the session does not go on in nano: %+v %v", res, err)
			}
		})
	}
}

// A heavy sandbox that cannot start leaves the session on nano; the error keeps its kind.
func TestSessionMoveStartFailure(t *testing.T) {
	f := newMoveFixture(t, nil)
	f.heavy.FailNew = sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the pool is empty")
	id := f.session(t, sandbox.TierAuto, "x = 1")
	_, err := f.run(t, id, "import pandas")
	if e := sandbox.AsError(err); e.Kind != sandbox.KindRuntimeUnavailable || !strings.Contains(e.Message, "the pool is empty") || e.Hint == "" {
		t.Fatalf("got %v", err)
	}
	if info, _ := f.m.Session(id); info.Tier != tierNano {
		t.Errorf("session moved: %+v", info)
	}
}

// A session created with runtime nano never moves: it answers with nano's error, and a hint in
// the reasons and on stderr.
func TestExplicitNanoSessionNeverMoves(t *testing.T) {
	f := newMoveFixture(t, nil)
	id := f.session(t, tierNano, "x = 1")
	for _, tc := range []struct{ code, what string }{
		{"t = Thread(); t.start()", "threads"},
		{"m = __import__('pan' + 'das')", "pandas"},
		{"subprocess.run(['ls'])", "subprocesses"},
		{"import pandas; ThreadPoolExecutor", "threads"}, // the router is not asked
	} {
		res, err := f.run(t, id, tc.code)
		if err != nil {
			t.Fatal(err)
		}
		hint := "this session was created with runtime nano; create it with runtime auto or heavy to use " + tc.what
		if res.Runtime != tierNano || res.Error == nil ||
			!slices.Equal(res.Routing.Reasons, []string{"nano: session " + id, "nano: " + hint}) ||
			!strings.HasSuffix(res.Stderr, "[agentbox] "+hint+"\n") {
			t.Errorf("%q: got %+v, want nano's error with the hint %q", tc.code, res, hint)
		}
	}
	// A streaming client gets the hint too: it ends the stream's stderr as it ends the result's.
	var streamed strings.Builder
	sink := sandbox.SinkFunc(func(s sandbox.Stream, p []byte) {
		if s == sandbox.StreamStderr {
			streamed.Write(p)
		}
	})
	if _, err := f.m.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: "m = __import__('pan' + 'das')", Output: sink}); err != nil ||
		!strings.HasSuffix(streamed.String(), "[agentbox] this session was created with runtime nano; create it with runtime auto or heavy to use pandas\n") {
		t.Errorf("streamed stderr %q, %v: want the hint at its end", streamed.String(), err)
	}
	if err := f.m.WriteFile(context.Background(), id, "a.txt", []byte("x")); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("file write on a nano session: %v, want invalid_request as before", err)
	}
	if len(f.heavy.Sessions()) != 0 {
		t.Error("a heavy sandbox was started")
	}
	if res, err := f.run(t, id, "1/0"); err != nil || len(res.Routing.Reasons) != 1 || strings.Contains(res.Stderr, "[agentbox]") {
		t.Errorf("an ordinary exception got a hint: %+v %v", res, err)
	}
}

// Writing a file moves an auto session on nano (files live in heavy sessions); reading and
// listing do not, and answer as before.
func TestSessionFileWriteMoves(t *testing.T) {
	f := newMoveFixture(t, nil)
	ctx := context.Background()
	id := f.session(t, sandbox.TierAuto, "x = 1")
	if _, err := f.m.ReadFile(ctx, id, "a.txt"); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("read on nano: %v, want invalid_request", err)
	}
	if _, err := f.m.ListFiles(ctx, id, ""); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("list on nano: %v, want invalid_request", err)
	}
	if len(f.heavy.Sessions()) != 0 {
		t.Fatal("reading moved the session")
	}
	if err := f.m.WriteFile(ctx, id, "data/in.csv", []byte("a,b\n")); err != nil {
		t.Fatal(err)
	}
	f.checkMoved(t, id, "x = 1")
	if b, err := f.m.ReadFile(ctx, id, "data/in.csv"); err != nil || string(b) != "a,b\n" {
		t.Errorf("read after the move: %q %v", b, err)
	}
	if res, err := f.run(t, id, "print(x)"); err != nil || res.Runtime != tierHeavy {
		t.Errorf("run after the move: %+v %v", res, err)
	}
}

// The replay log is bounded: 256 runs move, 257 do not; nor do runs past 1 MiB of code. The
// error says so, with a hint.
func TestSessionReplayBounds(t *testing.T) {
	ctx := context.Background()
	fill := func(f *moveFixture, n int, code func(i int) string) string {
		info, err := f.m.CreateSession(ctx, sandbox.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := f.m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: code(i)}); err != nil {
				t.Fatal(err)
			}
		}
		return info.ID
	}
	small := func(i int) string { return fmt.Sprintf("x%d = %d", i, i) }

	f := newMoveFixture(t, nil)
	id := fill(f, sandbox.MaxReplayRuns, small)
	res, err := f.run(t, id, "import pandas")
	if err != nil || !strings.HasSuffix(res.Routing.Reasons[0], "; replayed 256 earlier runs") {
		t.Fatalf("256 runs: %+v %v", res, err)
	}

	for _, tc := range []struct {
		name string
		n    int
		code func(int) string
		msg  string
	}{
		{"runs", sandbox.MaxReplayRuns + 1, small, "it has run more than the 256 runs a move replays"},
		{"bytes", 3, func(i int) string { return strings.Repeat("#", 400<<10) }, "its runs' code and input files pass the 1024 KiB a move replays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMoveFixture(t, nil)
			id := fill(f, tc.n, tc.code)
			for _, code := range []string{"import pandas", "t = Thread(); t.start()"} {
				_, err := f.run(t, id, code)
				e := sandbox.AsError(err)
				if e == nil || e.Kind != sandbox.KindConflict || !strings.HasSuffix(e.Message, tc.msg) || !strings.Contains(e.Hint, "runtime heavy") {
					t.Errorf("%s: got %v, want a conflict ending %q with a hint", code, err, tc.msg)
				}
			}
			if err := f.m.WriteFile(ctx, id, "a", nil); sandbox.KindOf(err) != sandbox.KindConflict {
				t.Errorf("file write: %v, want conflict", err)
			}
			if len(f.heavy.Sessions()) != 0 {
				t.Error("a heavy sandbox was started for a session that cannot move")
			}
		})
	}
}

// Runs of a session that is moving wait for the move: none runs in nano meanwhile, none runs in
// two sandboxes at once, and they land in heavy after the move, in order.
func TestSessionMoveSerialisesRuns(t *testing.T) {
	f := newMoveFixture(t, nil)
	f.heavy.Gate, f.heavy.Started = make(chan struct{}), make(chan struct{}, 1)
	id := f.session(t, sandbox.TierAuto, "x = 1")
	type out struct {
		res *sandbox.Result
		err error
	}
	first, second := make(chan out, 1), make(chan out, 1)
	go func() {
		res, err := f.run(t, id, "import pandas")
		first <- out{res, err}
	}()
	<-f.heavy.Started // the move has begun: it holds the session
	go func() {
		res, err := f.run(t, id, "y = 2")
		second <- out{res, err}
	}()
	// A file write waits too.
	wrote := make(chan error, 1)
	go func() { wrote <- f.m.WriteFile(context.Background(), id, "f.txt", []byte("z")) }()
	time.Sleep(50 * time.Millisecond)
	if got := f.nano.Sessions()[0].Codes(); !slices.Equal(got, []string{"x = 1"}) {
		t.Errorf("nano ran %q while the session moved", got)
	}
	select {
	case o := <-second:
		t.Fatalf("a run finished during the move: %+v %v", o.res, o.err)
	case err := <-wrote:
		t.Fatalf("a file write finished during the move: %v", err)
	default:
	}
	close(f.heavy.Gate)
	a, b := <-first, <-second
	if a.err != nil || a.res.Runtime != tierHeavy || b.err != nil || b.res.Runtime != tierHeavy {
		t.Fatalf("runs: %+v %v / %+v %v", a.res, a.err, b.res, b.err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	f.checkMoved(t, id, "x = 1", "import pandas", "y = 2")
	if h := f.heavy.Sessions()[0]; h.Overlaps() != 0 {
		t.Errorf("%d runs overlapped in the heavy sandbox", h.Overlaps())
	}
}

// A session closed while it moves stays closed: the heavy sandbox made for it is closed too.
func TestSessionClosedWhileMoving(t *testing.T) {
	f := newMoveFixture(t, nil)
	f.heavy.Gate, f.heavy.Started = make(chan struct{}), make(chan struct{}, 1)
	id := f.session(t, sandbox.TierAuto, "x = 1")
	done := make(chan error, 1)
	go func() {
		_, err := f.run(t, id, "import pandas")
		done <- err
	}()
	<-f.heavy.Started
	if err := f.m.CloseSession(id); err != nil {
		t.Fatal(err)
	}
	close(f.heavy.Gate)
	if err := <-done; !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("run: %v, want not_found", err)
	}
	if hs := f.heavy.Sessions(); len(hs) != 1 || !hs[0].Closed() {
		t.Error("the heavy sandbox was left open")
	}
	if _, err := f.m.Session(id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("session: %v, want not_found", err)
	}
}

// One-shot auto runs fall back to heavy on nano's refusals as they do on ModuleNotFoundError.
func TestManagerRetriesRefusalsInHeavy(t *testing.T) {
	for _, tc := range []struct{ code, reason string }{
		{"t = Thread(); t.start()", "heavy: retried after RuntimeError: can't start new thread in nano (nano cannot start threads)"},
		{"subprocess.run(['ls'])", "heavy: retried after OSError: [Errno 58] wasi does not support processes. in nano (nano cannot start subprocesses)"},
		{"asyncio.run(main())", "heavy: retried after OSError: [Errno 58] Not supported in nano (nano cannot open sockets)"},
	} {
		f := newMoveFixture(t, nil)
		res, err := f.m.Run(context.Background(), &sandbox.RunRequest{Code: tc.code})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"nano: no imports", tc.reason}
		if res.Runtime != tierHeavy || !slices.Equal(res.Routing.Reasons, want) {
			t.Errorf("%q: got %+v %q, want heavy %q", tc.code, res, res.Routing.Reasons, want)
		}
	}
	// Explicit nano runs keep nano's answer.
	f := newMoveFixture(t, nil)
	res, err := f.m.Run(context.Background(), &sandbox.RunRequest{Code: "t = Thread(); t.start()", Tier: tierNano})
	if err != nil || res.Runtime != tierNano || res.Error == nil {
		t.Errorf("explicit nano: %+v %v", res, err)
	}
}
