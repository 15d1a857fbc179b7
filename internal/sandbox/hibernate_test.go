package sandbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// hibernatingTier is the counter tier with Capabilities.HibernateAfter set; its sessions count
// their pauses and may say they must stay live.
type hibernatingTier struct {
	counterTier
	after    time.Duration
	mu       sync.Mutex
	stayLive string
	sessions []*hibernatingSession
}

type hibernatingSession struct {
	*counterSession
	t      *hibernatingTier
	pauses atomic.Int32
	asked  atomic.Int32
}

var _ sandbox.LiveHolder = (*hibernatingSession)(nil)

func (h *hibernatingTier) Capabilities() sandbox.Capabilities {
	c := h.counterTier.Capabilities()
	c.HibernateAfter = h.after
	return c
}

func (h *hibernatingTier) NewSession(ctx context.Context, o sandbox.SessionOptions) (sandbox.Session, error) {
	s, _ := h.counterTier.NewSession(ctx, o)
	hs := &hibernatingSession{counterSession: s.(*counterSession), t: h}
	h.mu.Lock()
	h.sessions = append(h.sessions, hs)
	h.mu.Unlock()
	return hs, nil
}

func (s *hibernatingSession) Pause(ctx context.Context) (sandbox.SnapshotRef, error) {
	s.pauses.Add(1)
	return s.counterSession.Pause(ctx)
}

func (s *hibernatingSession) MustStayLive() string {
	s.asked.Add(1)
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	return s.t.stayLive
}

func hibernatingManager(t *testing.T, tier *hibernatingTier) *sandbox.View {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.As(sandbox.Caller{Tenant: "acme"})
}

func sessionState(t *testing.T, v *sandbox.View, id string) sandbox.SessionState {
	t.Helper()
	info, err := v.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// A session of a tier that hibernates is paused once it has been unused for the tier's
// HibernateAfter, and its next run resumes it with its state; a used session is not paused.
func TestIdleSessionHibernates(t *testing.T) {
	tier := &hibernatingTier{counterTier: counterTier{durable: map[string]int{}}, after: 150 * time.Millisecond}
	v := hibernatingManager(t, tier)
	// Used more often than HibernateAfter: it stays live. Each idle spell is timed from the start
	// of a run to the end of the next, which holds the spell between them: an attempt where a
	// loaded machine stretched one to HibernateAfter proves nothing either way and is made again
	// with a new session (a pause after spells all shorter fails at once).
	var info sandbox.SessionInfo
	var s *hibernatingSession
	for attempt := 1; ; attempt++ {
		var err error
		info, err = v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
		if err != nil {
			t.Fatal(err)
		}
		prev := time.Now()
		addRun(t, v, info.ID, 5)
		longest := time.Duration(0)
		for i := 0; i < 4; i++ {
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			addRun(t, v, info.ID, 1)
			longest = max(longest, time.Since(prev))
			prev = start
		}
		tier.mu.Lock()
		s = tier.sessions[len(tier.sessions)-1]
		tier.mu.Unlock()
		n := s.pauses.Load()
		if n == 0 {
			break
		}
		if longest < tier.after {
			t.Fatalf("a session in use was paused %d times (idle at most %v between runs, HibernateAfter %v)", n, longest, tier.after)
		}
		if attempt == 10 {
			t.Fatalf("in 10 attempts the machine never ran 5 runs 50 ms apart without an idle spell of %v", tier.after)
		}
		t.Logf("attempt %d: an idle spell of up to %v between runs on a loaded machine, and %d pauses; again", attempt, longest, n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.pauses.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not hibernated after %v unused", 10*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Hibernation is the tier's business: clients still see a live session.
	if st := sessionState(t, v, info.ID); st != sandbox.SessionLive {
		t.Fatalf("a hibernated session says %s, want live", st)
	}
	if n := s.pauses.Load(); n != 1 {
		t.Fatalf("paused %d times, want 1", n)
	}
	if res := addRun(t, v, info.ID, 1); res.Stdout != "10\n" {
		t.Fatalf("after hibernation the session's run printed %q, want 10", res.Stdout)
	}
	if st := sessionState(t, v, info.ID); st != sandbox.SessionLive {
		t.Fatalf("after its next run the session is %s, want live", st)
	}
	// It hibernates again after its next idle spell, once.
	for s.pauses.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("not hibernated a second time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond)
	if n := s.pauses.Load(); n != 2 {
		t.Fatalf("paused %d times, want 2 (a hibernated session is not paused again)", n)
	}
}

// A session that must stay live (a command running, in the heavy tier) is not paused, and is
// not asked again before its next use; once it may go, it goes after its next idle spell.
func TestSessionThatMustStayLiveIsNotHibernated(t *testing.T) {
	tier := &hibernatingTier{counterTier: counterTier{durable: map[string]int{}}, after: 100 * time.Millisecond, stayLive: "1 command(s) running"}
	v := hibernatingManager(t, tier)
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	addRun(t, v, info.ID, 1)
	s := tier.sessions[0]
	deadline := time.Now().Add(10 * time.Second)
	for s.asked.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never asked whether it must stay live")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond)
	if n, a := s.pauses.Load(), s.asked.Load(); n != 0 || a != 1 {
		t.Fatalf("paused %d times and asked %d times, want 0 and 1", n, a)
	}
	if st := sessionState(t, v, info.ID); st != sandbox.SessionLive {
		t.Fatalf("state %s, want live", st)
	}
	tier.mu.Lock()
	tier.stayLive = ""
	tier.mu.Unlock()
	addRun(t, v, info.ID, 1)
	for s.pauses.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not hibernated once it could be")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A hibernated session paused by request becomes paused (the tier's pause of a hibernated
// session costs nothing more), and a daemon that crashes while a session hibernates brings it
// back from the hibernation's checkpoint even when its steps are not durable.
func TestHibernatedSessionPauseAndCrash(t *testing.T) {
	tier := &hibernatingTier{counterTier: counterTier{durable: map[string]int{}, memoryOnly: true}, after: 100 * time.Millisecond}
	dir := t.TempDir()
	m1, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	v1 := m1.As(sandbox.Caller{Tenant: "acme"})
	a, err := v1.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := v1.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	addRun(t, v1, a.ID, 5)
	addRun(t, v1, b.ID, 7)
	deadline := time.Now().Add(10 * time.Second)
	for tier.sessions[0].pauses.Load() == 0 || tier.sessions[1].pauses.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not hibernated")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := v1.Pause(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	if st := sessionState(t, v1, b.ID); st != sandbox.SessionPaused {
		t.Fatalf("paused by request: %s", st)
	}
	// A crash: a second Manager reads the records the first left (the first is not closed, so
	// its shutdown does not pause anything again).
	m2, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	v2 := m2.As(sandbox.Caller{Tenant: "acme"})
	if res := addRun(t, v2, a.ID, 1); res.Stdout != "6\n" {
		t.Fatalf("the hibernated session after a crash printed %q, want 6", res.Stdout)
	}
	if res := addRun(t, v2, b.ID, 1); res.Stdout != "8\n" {
		t.Fatalf("the paused session after a crash printed %q, want 8", res.Stdout)
	}
}

// Without HibernateAfter, an idle session stays live (until the idle timeout).
func TestNoHibernationWithoutHibernateAfter(t *testing.T) {
	tier := &hibernatingTier{counterTier: counterTier{durable: map[string]int{}}}
	v := hibernatingManager(t, tier)
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	addRun(t, v, info.ID, 1)
	time.Sleep(300 * time.Millisecond)
	if st, n := sessionState(t, v, info.ID), tier.sessions[0].pauses.Load(); st != sandbox.SessionLive || n != 0 {
		t.Fatalf("state %s after %d pauses, want live and none", st, n)
	}
}

// A session paused, then resumed by a run that moved it on, comes back after a crash at its
// newest durable step, not at the pause's checkpoint.
func TestResumedSessionAfterCrashIsNotBackAtItsPause(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	dir := t.TempDir()
	m1, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	v1 := m1.As(sandbox.Caller{Tenant: "acme"})
	info, err := v1.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	addRun(t, v1, info.ID, 1)
	waitDurable(t, v1, info.ID)
	if _, err := v1.Pause(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	addRun(t, v1, info.ID, 10) // resumes it: 11
	waitDurable(t, v1, info.ID)
	// A crash: a second Manager reads the records the first left (the first is not closed, so
	// its shutdown does not pause the session again).
	m2, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	v2 := m2.As(sandbox.Caller{Tenant: "acme"})
	if res := addRun(t, v2, info.ID, 100); res.Stdout != "111\n" {
		t.Fatalf("after the crash the session printed %q, want 111 (its newest step, 11, plus 100)", res.Stdout)
	}
}
