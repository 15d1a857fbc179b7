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
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	addRun(t, v, info.ID, 5)
	// Used more often than HibernateAfter: it stays live.
	for i := 0; i < 4; i++ {
		time.Sleep(50 * time.Millisecond)
		addRun(t, v, info.ID, 1)
	}
	s := tier.sessions[0]
	if n := s.pauses.Load(); n != 0 {
		t.Fatalf("a session in use was paused %d times", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sessionState(t, v, info.ID) != sandbox.SessionPaused {
		if time.Now().After(deadline) {
			t.Fatalf("not hibernated after %v unused: state %s", 10*time.Second, sessionState(t, v, info.ID))
		}
		time.Sleep(20 * time.Millisecond)
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
	for sessionState(t, v, info.ID) != sandbox.SessionPaused {
		if time.Now().After(deadline) {
			t.Fatal("not hibernated once it could be")
		}
		time.Sleep(20 * time.Millisecond)
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
