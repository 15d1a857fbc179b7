package daemon_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// Sessions that follow the code, with both real tiers: an auto session starts on nano and moves
// to heavy, with its variables, when its code needs heavy; threaded code lands in heavy.
func TestDaemonSessionFollowsCode(t *testing.T) {
	c := startHeavy(t)
	ctx := context.Background()

	// The new user's two turns in one session: plain Python, then pandas, with x carried over.
	t.Run("TwoTurns", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if s.Runtime != "nano" {
			t.Fatalf("an auto session starts on %s, want nano", s.Runtime)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "x = sum([1, 2, 3]); print(x)"})
		if err != nil || res.Stdout != "6\n" || res.Runtime != "nano" {
			t.Fatalf("turn 1: %+v %v", res, err)
		}
		res, err = c.RunInSession(ctx, s.ID, api.RunRequest{Code: "import pandas as pd; print(pd.Series([x]).sum())", Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"heavy: session moved from nano: the code imports pandas (not in nano; in image python-datascience); replayed 1 earlier run"}
		if res.Runtime != "heavy" || res.Stdout != "6\n" || res.Error != nil || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("turn 2: %+v (stderr %q)\nwant heavy, 6, %q", res, res.Stderr, want)
		}
		info, err := c.GetSession(ctx, s.ID)
		if err != nil || info.Runtime != "heavy" || info.Runs != 2 {
			t.Errorf("session after the move: %+v %v", info, err)
		}
		res, err = c.RunInSession(ctx, s.ID, api.RunRequest{Code: "x += 1; print(x, pd.__name__)", Timeout: 60})
		if err != nil || res.Stdout != "7 pandas\n" || !slices.Equal(res.Routing.Reasons, []string{"heavy: session " + s.ID}) {
			t.Errorf("turn 3: %+v %v", res, err)
		}
	})

	t.Run("ThreadsInSession", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "data = [-1, -2, -3]"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: threaded, Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"heavy: session moved from nano: the code uses threads (concurrent.futures), which nano cannot start; replayed 1 earlier run"}
		if res.Runtime != "heavy" || res.Stdout != "[1, 2, 3]\n" || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("got %+v (stderr %q)\nwant heavy with %q", res, res.Stderr, want)
		}
	})

	// A thread the router cannot see: nano refuses it, and the session moves after the fact.
	t.Run("ThreadErrorMovesSession", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "import threading\nout = []"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: hiddenThread, Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"nano: session " + s.ID,
			"heavy: session moved from nano after RuntimeError: can't start new thread in nano (nano cannot start threads); replayed 1 earlier run, then this run again"}
		if res.Runtime != "heavy" || res.Stdout != "['ran']\n" || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("got %+v (stderr %q)\nwant heavy with %q", res, res.Stderr, want)
		}
	})

	t.Run("ThreadsOneShot", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "data = [-1, -2, -3]\n" + threaded, Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"heavy: uses threads (concurrent.futures), which nano cannot start"}
		if res.Runtime != "heavy" || res.Stdout != "[1, 2, 3]\n" || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("got %+v\nwant heavy with %q", res, want)
		}
		res, err = c.Run(ctx, api.RunRequest{Code: "import threading\nout = []\n" + hiddenThread, Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if res.Runtime != "heavy" || res.Stdout != "['ran']\n" ||
			!slices.Contains(res.Routing.Reasons, "heavy: retried after RuntimeError: can't start new thread in nano (nano cannot start threads)") {
			t.Fatalf("hidden thread, one-shot: %+v", res)
		}
	})

	// A session created with runtime nano never moves: nano's error, and a hint.
	t.Run("ExplicitNanoHints", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "data = [-1, -2, -3]\n" + threaded})
		if err != nil {
			t.Fatal(err)
		}
		hint := "this session was created with runtime nano; create it with runtime auto or heavy to use threads"
		if res.Runtime != "nano" || res.Error == nil || res.Error.Name != "RuntimeError" ||
			!slices.Contains(res.Routing.Reasons, "nano: "+hint) || !strings.Contains(res.Stderr, hint) {
			t.Fatalf("got %+v", res)
		}
		if info, _ := c.GetSession(ctx, s.ID); info.Runtime != "nano" {
			t.Errorf("an explicit nano session moved: %+v", info)
		}
	})

	// Writing a file moves an auto session on nano: files live in heavy sessions.
	t.Run("FileWriteMoves", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "n = 2"}); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFile(ctx, s.ID, "in.txt", []byte("abc")); err != nil {
			t.Fatal(err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(open('in.txt').read() * n)", Timeout: 60})
		if err != nil || res.Runtime != "heavy" || res.Stdout != "abcabc\n" {
			t.Fatalf("got %+v %v", res, err)
		}
	})

	// A run that does not replay the same in heavy (it checks it is on nano) stops the move: the
	// session stays on nano with its variables, and the error is a conflict that says why.
	t.Run("ReplayFailureKeepsNano", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "import sys\nassert sys.platform == 'wasi'\ny = 5"}); err != nil {
			t.Fatal(err)
		}
		_, err = c.RunInSession(ctx, s.ID, api.RunRequest{Code: "import pandas", Timeout: 60})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "conflict" || e.Hint == "" ||
			!strings.Contains(e.Message, "replaying run 1 of 1 raised AssertionError") {
			t.Fatalf("got %v, want a conflict naming the replay", err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(y)"})
		if err != nil || res.Runtime != "nano" || res.Stdout != "5\n" {
			t.Errorf("after the failed move: %+v %v", res, err)
		}
	})
}

// threaded maps abs over data with a thread pool, printing [1, 2, 3] for [-1, -2, -3].
const threaded = "from concurrent.futures import ThreadPoolExecutor\n" +
	"with ThreadPoolExecutor(max_workers=2) as ex:\n" +
	"    print(sorted(ex.map(abs, data)))\n"

// hiddenThread starts a thread the router cannot see (the class is looked up by a computed
// name), appending to out.
const hiddenThread = "T = getattr(threading, 'Th' + 'read')\n" +
	"t = T(target=lambda: out.append('ran'))\n" +
	"t.start(); t.join()\n" +
	"print(out)\n"
