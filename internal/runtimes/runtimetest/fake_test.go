package runtimetest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// explainModules reads a ModuleNotFoundError as a Need, as a tier without packages would.
func explainModules(res *sandbox.Result, err error) (sandbox.Need, bool) {
	if err != nil || res == nil || res.Error == nil || res.Error.Name != "ModuleNotFoundError" {
		return sandbox.Need{}, false
	}
	mod, _ := strings.CutPrefix(res.Error.Value, "No module named ")
	return sandbox.Need{After: res.Error.Name + ": " + res.Error.Value, Module: strings.Trim(mod, "'")}, true
}

// The Fake passes the suite's ability sub-suites, as three tiers: a contained one with caps and
// an Explainer, one with images, network and session files, and one without sessions.
func TestFakeConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		fake func() *runtimetest.Fake
	}{
		{"contained", func() *runtimetest.Fake {
			f := runtimetest.NewFake(sandbox.Capabilities{Tier: "small", Sessions: true, Contained: true,
				Max: sandbox.Limits{MemoryBytes: 512 << 20, FilesBytes: 32 << 20}})
			f.Explain = explainModules
			return f
		}},
		{"images", func() *runtimetest.Fake {
			f := runtimetest.NewFake(sandbox.Capabilities{Tier: "big", Images: true, Network: true, Threads: true,
				Processes: true, Sockets: true, Sessions: true, SessionFiles: true})
			f.Catalog = []sandbox.ImageInfo{
				{Name: "python-base", Default: true, Python: "3.12.1", Modules: []string{"json", "os"}},
				{Name: "python-datascience", Python: "3.12.1", Packages: map[string]string{"pandas": "2.2.0"},
					Modules: []string{"json", "os", "pandas"}},
			}
			return f
		}},
		{"no sessions", func() *runtimetest.Fake {
			return runtimetest.NewFake(sandbox.Capabilities{Tier: "oneshot", Contained: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtimetest.Run(t, func(*testing.T) sandbox.Runtime { return tc.fake() }, runtimetest.Options{NoInterpreter: true})
		})
	}
}

// The Fake answers through Answer, one-shot and in sessions, names its tier in results (and in an
// error's partial result), and records what it ran.
func TestFakeAnswersAndRecords(t *testing.T) {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: "t", Sessions: true})
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		switch {
		case req.Code == "limit":
			return nil, &sandbox.Error{Kind: sandbox.KindTimeout, Result: &sandbox.Result{Stdout: "partial"}}
		case s != nil:
			return &sandbox.Result{ExitCode: len(s.Requests())}, nil
		}
		return nil, nil // the default: Echo
	}
	ctx := context.Background()
	res, err := f.Run(ctx, &sandbox.RunRequest{Code: "print(1)"})
	if err != nil || res.Stdout != "print(1)" || res.Runtime != "t" {
		t.Errorf("echo: %+v %v", res, err)
	}
	_, err = f.Run(ctx, &sandbox.RunRequest{Code: "limit"})
	if e := sandbox.AsError(err); e.Kind != sandbox.KindTimeout || e.Result.Runtime != "t" {
		t.Errorf("limit: %+v", e)
	}
	if runs := f.Runs(); len(runs) != 2 || runs[0].Code != "print(1)" || runs[1].Code != "limit" {
		t.Errorf("runs %+v", runs)
	}
	sess, err := f.NewSession(ctx, sandbox.SessionOptions{Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		if res, err := sess.Run(ctx, &sandbox.RunRequest{Code: "x"}); err != nil || res.ExitCode != want || res.Runtime != "t" {
			t.Errorf("session run %d: %+v %v", want, res, err)
		}
	}
	ss := f.Sessions()
	if len(ss) != 1 || ss[0].Options().Env["A"] != "1" || len(ss[0].Codes()) != 2 || ss[0].Closed() {
		t.Fatalf("sessions %+v", ss)
	}
	if _, ok := sess.(sandbox.SessionFiles); ok {
		t.Error("a session without Caps.SessionFiles is a sandbox.SessionFiles")
	}
	f.Close()
	if !ss[0].Closed() {
		t.Error("Close left a session open")
	}
	if _, err := sess.Run(ctx, &sandbox.RunRequest{Code: "x"}); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("run in a closed session: %v", err)
	}
	if _, err := f.Run(ctx, &sandbox.RunRequest{Code: "x"}); sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable {
		t.Errorf("run after Close: %v", err)
	}
}

// NewSession signals Started, waits for Gate (or the context), then fails with FailNew.
func TestFakeSessionStart(t *testing.T) {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: "t", Sessions: true})
	f.Started, f.Gate = make(chan struct{}, 1), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := f.NewSession(context.Background(), sandbox.SessionOptions{})
		done <- err
	}()
	<-f.Started
	select {
	case err := <-done:
		t.Fatalf("NewSession passed a closed gate: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(f.Gate)
	if err := <-done; err != nil || len(f.Sessions()) != 1 {
		t.Fatalf("after the gate: %v, %d sessions", err, len(f.Sessions()))
	}

	f = runtimetest.NewFake(sandbox.Capabilities{Tier: "t", Sessions: true})
	f.Gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.NewSession(ctx, sandbox.SessionOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled start: %v", err)
	}
	f.Gate, f.FailNew = nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the pool is empty")
	if _, err := f.NewSession(context.Background(), sandbox.SessionOptions{}); !errors.Is(err, sandbox.ErrRuntimeUnavailable) || len(f.Sessions()) != 0 {
		t.Errorf("FailNew: %v, %d sessions", err, len(f.Sessions()))
	}
}

// Runs in one session that overlap are counted.
func TestFakeCountsOverlaps(t *testing.T) {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: "t", Sessions: true})
	release := make(chan struct{})
	var in sync.WaitGroup
	in.Add(2)
	f.Answer = func(context.Context, *sandbox.RunRequest, *runtimetest.FakeSession) (*sandbox.Result, error) {
		in.Done()
		<-release
		return nil, nil
	}
	sess, _ := f.NewSession(context.Background(), sandbox.SessionOptions{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess.Run(context.Background(), &sandbox.RunRequest{Code: "x"})
		}()
	}
	in.Wait()
	close(release)
	wg.Wait()
	if n := f.Sessions()[0].Overlaps(); n != 1 {
		t.Errorf("%d overlaps, want 1", n)
	}
}

// Health is settable; a run's files land in a file session's files.
func TestFakeHealthAndRunFiles(t *testing.T) {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: "t", Sessions: true, SessionFiles: true})
	ctx := context.Background()
	if state, ok := f.Health(ctx); state != "running" || !ok {
		t.Errorf("default health %q %v", state, ok)
	}
	f.SetHealth("no worker started", false)
	if state, ok := f.Health(ctx); state != "no worker started" || ok {
		t.Errorf("set health %q %v", state, ok)
	}
	sess, _ := f.NewSession(ctx, sandbox.SessionOptions{})
	if _, err := sess.Run(ctx, &sandbox.RunRequest{Code: "x", Files: []sandbox.File{{Path: "in.csv", Content: []byte("a,b")}}}); err != nil {
		t.Fatal(err)
	}
	if b, err := sess.(sandbox.SessionFiles).ReadFile(ctx, sandbox.WorkDir+"/in.csv"); err != nil || string(b) != "a,b" {
		t.Errorf("a run's file: %q %v", b, err)
	}
}
