package runtimetest

import (
	"context"
	"slices"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Fake is a sandbox.Runtime for the tests of the code around runtimes (the Manager, the front
// doors, the CLI, the bench): it runs no code. What it offers is the Capabilities it is given;
// its runs, one-shot and in sessions, answer through Answer; it records what it was asked.
//
// Set the fields before the runs and sessions that read them. A Fake is always a sandbox.Health,
// a sandbox.Catalog and a sandbox.Explainer; with their defaults (healthy, no images, never a
// Need) it behaves as a runtime without those abilities. Its sessions are sandbox.SessionFiles
// exactly when Caps.SessionFiles is set, as the Manager asks by type assertion.
//
// The Fake passes runtimetest.Run with Options.NoInterpreter: the ability sub-suites, less the
// cases that read what Python code did (fake_test.go). The rest of the suite needs a real
// interpreter.
type Fake struct {
	// Caps is what Capabilities returns; Caps.Tier names the fake in its results.
	Caps sandbox.Capabilities
	// Answer answers each run. Default Echo.
	Answer Answer
	// Explain is what Cannot answers. Default: never a Need.
	Explain func(res *sandbox.Result, err error) (sandbox.Need, bool)
	// Catalog is what Images lists.
	Catalog []sandbox.ImageInfo
	// Started, when set, receives a value as each NewSession begins, before Gate.
	Started chan struct{}
	// Gate, when set, holds each NewSession until it is closed or the context ends: a slow start.
	Gate chan struct{}
	// FailNew, when set, is what NewSession returns, after Gate: a start that fails.
	FailNew error

	mu       sync.Mutex
	runs     []sandbox.RunRequest
	sessions []*FakeSession
	state    string // "" is "running"
	down     bool
	closed   bool
}

// Answer answers req, a one-shot run when s is nil, else a run in session s (whose Requests
// already hold req). Nil, nil answers as Echo does. The Fake sets the Runtime of a result (and of
// an *sandbox.Error's Result) that has none to its tier.
type Answer func(ctx context.Context, req *sandbox.RunRequest, s *FakeSession) (*sandbox.Result, error)

// Echo is the default Answer: the code comes back as stdout, with exit code 0.
func Echo(_ context.Context, req *sandbox.RunRequest, _ *FakeSession) (*sandbox.Result, error) {
	return &sandbox.Result{Stdout: req.Code}, nil
}

// NewFake returns a Fake with the capabilities caps.
func NewFake(caps sandbox.Capabilities) *Fake { return &Fake{Caps: caps} }

// Interface guards
var (
	_ sandbox.Runtime      = (*Fake)(nil)
	_ sandbox.Health       = (*Fake)(nil)
	_ sandbox.Catalog      = (*Fake)(nil)
	_ sandbox.Explainer    = (*Fake)(nil)
	_ sandbox.Session      = (*FakeSession)(nil)
	_ sandbox.Session      = fileSession{}
	_ sandbox.SessionFiles = fileSession{}
)

// Capabilities returns Caps.
func (f *Fake) Capabilities() sandbox.Capabilities { return f.Caps }

// Run records req and answers it; after Close it fails with runtime_unavailable.
func (f *Fake) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the %s runtime is closed", f.Caps.Tier)
	}
	f.runs = append(f.runs, *req)
	f.mu.Unlock()
	return f.answer(ctx, req, nil)
}

func (f *Fake) answer(ctx context.Context, req *sandbox.RunRequest, s *FakeSession) (*sandbox.Result, error) {
	answer := f.Answer
	if answer == nil {
		answer = Echo
	}
	res, err := answer(ctx, req, s)
	if res == nil && err == nil {
		res, err = Echo(ctx, req, s)
	}
	if res != nil && res.Runtime == "" {
		res.Runtime = f.Caps.Tier
	}
	if e := sandbox.AsError(err); e != nil && e.Result != nil && e.Result.Runtime == "" {
		e.Result.Runtime = f.Caps.Tier
	}
	return res, err
}

// NewSession starts a session: it signals Started, waits for Gate, then fails with FailNew or
// records a new session. A tier without Caps.Sessions refuses with runtime_unavailable.
func (f *Fake) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	if !f.Caps.Sessions {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the %s tier has no sessions", f.Caps.Tier)
	}
	if f.Started != nil {
		f.Started <- struct{}{}
	}
	if f.Gate != nil {
		select {
		case <-f.Gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.FailNew != nil {
		return nil, f.FailNew
	}
	s := &FakeSession{rt: f, opts: opts}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the %s runtime is closed", f.Caps.Tier)
	}
	f.sessions = append(f.sessions, s)
	if f.Caps.SessionFiles {
		s.files = newFileTree()
		return fileSession{s}, nil
	}
	return s, nil
}

// Close ends every session; later runs and sessions fail, and Health says "closed".
func (f *Fake) Close() error {
	f.mu.Lock()
	f.closed = true
	ss := slices.Clone(f.sessions)
	f.mu.Unlock()
	for _, s := range ss {
		_ = s.Close()
	}
	return nil
}

// Health reports what SetHealth set: by default "running" and ok, as the API says of a runtime
// without Health; "closed" and not ok after Close.
func (f *Fake) Health(context.Context) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return "closed", false
	case f.state == "":
		return "running", !f.down
	}
	return f.state, !f.down
}

// SetHealth sets what Health reports.
func (f *Fake) SetHealth(state string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state, f.down = state, !ok
}

// Images returns Catalog.
func (f *Fake) Images() []sandbox.ImageInfo { return slices.Clone(f.Catalog) }

// Cannot answers with Explain.
func (f *Fake) Cannot(res *sandbox.Result, err error) (sandbox.Need, bool) {
	if f.Explain == nil {
		return sandbox.Need{}, false
	}
	return f.Explain(res, err)
}

// Runs returns the one-shot requests the fake was given, in order.
func (f *Fake) Runs() []sandbox.RunRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs)
}

// Sessions returns the sessions the fake started, in order, closed ones included.
func (f *Fake) Sessions() []*FakeSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sessions)
}

// FakeSession is a session of a Fake. It records its runs, and counts those that overlapped.
type FakeSession struct {
	rt   *Fake
	opts sandbox.SessionOptions

	mu       sync.Mutex
	reqs     []sandbox.RunRequest
	closed   bool
	running  int
	overlaps int
	files    fileTree // nil without Caps.SessionFiles
}

// Run records req and answers it through the Fake's Answer; a closed session answers conflict.
// With session files, the request's files are written to them first.
func (s *FakeSession) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.KindConflict, "session closed")
	}
	s.running++
	if s.running > 1 {
		s.overlaps++
	}
	s.reqs = append(s.reqs, *req)
	if s.files != nil {
		for _, f := range req.Files {
			if p, err := sandbox.CleanPath(f.Path); err == nil {
				_ = s.files.write(p, f.Content)
			}
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}()
	return s.rt.answer(ctx, req, s)
}

// Close closes the session; it is safe to call more than once.
func (s *FakeSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Options returns the options the session was started with.
func (s *FakeSession) Options() sandbox.SessionOptions { return s.opts }

// Requests returns the requests the session ran, in order.
func (s *FakeSession) Requests() []sandbox.RunRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Codes returns the code of each request the session ran, in order.
func (s *FakeSession) Codes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = r.Code
	}
	return out
}

// Closed reports whether the session was closed.
func (s *FakeSession) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Overlaps counts the runs that started while another run of the session was in progress.
func (s *FakeSession) Overlaps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overlaps
}
