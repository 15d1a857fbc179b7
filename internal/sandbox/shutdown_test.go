package sandbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// pausing is a fake tier whose sessions keep their steps in memory only and can pause, as
// heavy's do; its Restore brings back what a pause stored.
type pausing struct {
	*runtimetest.Fake
	mu       sync.Mutex
	paused   []string
	restored []string
}

type pausingSession struct {
	sandbox.Session
	rt *pausing
	id string
}

func (p *pausing) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := p.Fake.NewSession(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &pausingSession{Session: s, rt: p, id: opts.ID}, nil
}

func (s *pausingSession) Pause(context.Context) (sandbox.SnapshotRef, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	s.rt.paused = append(s.rt.paused, s.id)
	return sandbox.SnapshotRef{Ref: "checkpoint-of-" + s.id}, nil
}

func (s *pausingSession) Resume(context.Context) error { return nil }

func (p *pausing) Restore(ctx context.Context, ref string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	p.mu.Lock()
	p.restored = append(p.restored, ref)
	p.mu.Unlock()
	return p.NewSession(ctx, opts)
}

// A daemon that shuts down with sessions outliving it pauses the live ones whose tier can pause,
// so the next daemon restores each from its checkpoint on its next use.
func TestShutdownPausesLiveSessions(t *testing.T) {
	dir := t.TempDir()
	newRT := func() *pausing {
		caps := capsOf(tierHeavy)
		caps.Pause = true
		return &pausing{Fake: runtimetest.NewFake(caps)}
	}
	rt1 := newRT()
	m1, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt1}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	info, err := m1.CreateSession(context.Background(), sandbox.SessionOptions{Tier: tierHeavy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.RunInSession(context.Background(), info.ID, &sandbox.RunRequest{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	if len(rt1.paused) != 1 || rt1.paused[0] != info.ID {
		t.Fatalf("paused at shutdown: %v, want [%s]", rt1.paused, info.ID)
	}
	rt2 := newRT()
	m2, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt2}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, err := m2.RunInSession(context.Background(), info.ID, &sandbox.RunRequest{Code: "print(x)"}); err != nil {
		t.Fatalf("the next daemon's run: %v", err)
	}
	if len(rt2.restored) != 1 || rt2.restored[0] != "checkpoint-of-"+info.ID {
		t.Fatalf("restored: %v", rt2.restored)
	}
}
