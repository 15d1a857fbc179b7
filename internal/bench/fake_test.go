package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// fakeTarget is a daemon in memory: a pool of workers × warm interpreters that a run empties by
// one and that refills after refill, and sessions that keep x and data and cost 5 MiB each.
type fakeTarget struct {
	mu      sync.Mutex
	workers int
	warmCap int
	warm    int
	busy    int
	refill  time.Duration
	noPool  bool // health says nothing about the pool
	runs    int
	closed  bool
	// open counts open sessions; maxSessions > 0 refuses more, as a daemon's cap does.
	open, maxSessions int
	// notOurs makes Memory answer as for a daemon the bench did not start.
	notOurs bool
	// warmTarget is reported as the pool's target, as the heavy tier's health does.
	warmTarget int
	// holdSessions makes open sessions count as workers in use, as heavy sandboxes do.
	holdSessions bool
	// hibernateAfter > 0 makes a session unused that long hibernate: it holds no worker and
	// costs no memory, as a heavy daemon's do; paused counts them.
	hibernateAfter time.Duration
	sessions       []*fakeSession
}

// fakeSessionMiB is what the fake counts per open session; fakeBaseMiB the daemon alone.
const (
	fakeSessionMiB = 5
	fakeBaseMiB    = 100
)

// Interface guards.
var (
	_ target        = (*fakeTarget)(nil)
	_ targetSession = (*fakeSession)(nil)
)

func (f *fakeTarget) Run(ctx context.Context, code string, timeout time.Duration) (runResult, error) {
	f.mu.Lock()
	f.runs++
	f.busy++
	pool := "cold"
	if f.warm > 0 {
		f.warm--
		pool = "warm"
		if f.refill > 0 {
			time.AfterFunc(f.refill, func() {
				f.mu.Lock()
				f.warm = min(f.warm+1, f.warmCap)
				f.mu.Unlock()
			})
		} else {
			f.warm++
		}
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.busy--
		f.mu.Unlock()
	}()
	if strings.Contains(code, "_bench_time") {
		return runResult{Stdout: "42\n\n" + timingMarker + "0.5\n", Pool: pool}, nil
	}
	return runResult{Stdout: "hi\n", Pool: pool}, nil
}

func (f *fakeTarget) NewSession(ctx context.Context) (targetSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxSessions > 0 && f.open >= f.maxSessions {
		return nil, fmt.Errorf("conflict: %d sessions open", f.open)
	}
	f.open++
	s := &fakeSession{f: f, lastRun: time.Now()}
	f.sessions = append(f.sessions, s)
	return s, nil
}

// paused counts the open sessions that have hibernated. Called with f.mu held.
func (f *fakeTarget) paused() int {
	n := 0
	for _, s := range f.sessions {
		if !s.closed && f.hibernateAfter > 0 && time.Since(s.lastRun) >= f.hibernateAfter {
			n++
		}
	}
	return n
}

func (f *fakeTarget) Memory(ctx context.Context) (memSample, error) {
	if f.notOurs {
		return memSample{}, errNotOurs
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	live := f.open - f.paused()
	return memSample{PSSKiB: int64(fakeBaseMiB+fakeSessionMiB*live) << 10, Processes: 1 + live}, nil
}

func (f *fakeTarget) Pool(ctx context.Context) (poolState, bool, error) {
	if f.noPool {
		return poolState{}, false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	free := f.workers - f.busy
	if f.holdSessions {
		free -= f.open - f.paused()
	}
	return poolState{Free: free, Workers: f.workers, Warm: f.warm, WarmTarget: f.warmTarget}, true, nil
}

func (f *fakeTarget) Close() error {
	f.closed = true
	return nil
}

type fakeSession struct {
	f       *fakeTarget
	x       *int
	data    bool
	lastRun time.Time // guarded by f.mu
	closed  bool
}

func (s *fakeSession) Run(ctx context.Context, code string) (runResult, error) {
	if s.f != nil {
		s.f.mu.Lock()
		s.lastRun = time.Now()
		s.f.mu.Unlock()
	}
	switch code {
	case helloCode:
		return runResult{Stdout: "hi\n"}, nil
	case densityCell:
		s.data = true
		return runResult{Stdout: densityCellOut}, nil
	case densityNext:
		if !s.data {
			return runResult{Failure: "NameError: name 'data' is not defined"}, nil
		}
		return runResult{Stdout: densityNextOut}, nil
	}
	if s.x == nil {
		s.x = new(int)
	} else {
		*s.x++
	}
	return runResult{Stdout: fmt.Sprintf("%d\n", *s.x)}, nil
}

func (s *fakeSession) Close() error {
	if s.f != nil {
		s.f.mu.Lock()
		s.f.open--
		s.closed = true
		s.f.mu.Unlock()
	}
	return nil
}
