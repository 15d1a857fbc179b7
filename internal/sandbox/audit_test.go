package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// recordingSink keeps the events it is given.
type recordingSink struct {
	mu     sync.Mutex
	events []sandbox.AuditEvent
	closed bool
}

// Interface guards.
var (
	_ sandbox.AuditSink = (*recordingSink)(nil)
	_ io.Closer         = (*recordingSink)(nil)
)

func (s *recordingSink) Audit(_ context.Context, ev sandbox.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		panic("audit event after Close")
	}
	s.events = append(s.events, ev)
	return nil
}

func (s *recordingSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *recordingSink) all() []sandbox.AuditEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

func hexSHA(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

func TestManagerAudits(t *testing.T) {
	sink := &recordingSink{}
	m, _ := newManager(t, sandbox.ManagerOptions{Audit: sink, SessionIdle: time.Hour})
	ctx := context.Background()

	if _, err := m.Run(ctx, &sandbox.RunRequest{Code: "print(1)"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(ctx, &sandbox.RunRequest{Code: "print(2)", Limits: sandbox.Limits{Timeout: time.Hour}}); err == nil {
		t.Fatal("a timeout above the maximum was accepted")
	}
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	if err := m.CloseSession(info.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.CloseSession(info.ID); err == nil {
		t.Fatal("closed twice")
	}
	open, err := m.CreateSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	ev := sink.all()
	kinds := []sandbox.AuditKind{}
	for _, e := range ev {
		kinds = append(kinds, e.Kind)
	}
	want := []sandbox.AuditKind{sandbox.AuditRun, sandbox.AuditRun, sandbox.AuditSessionCreate, sandbox.AuditRun,
		sandbox.AuditSessionClose, sandbox.AuditSessionCreate, sandbox.AuditSessionClose}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	ok := ev[0]
	if ok.Decision != sandbox.AuditAllow || ok.Run.CodeSHA256 != hexSHA("print(1)") || ok.Run.Tier != sandbox.TierNano ||
		len(ok.Run.Reasons) != 1 || ok.Run.Outcome != "ok" || ok.Run.Limits.Timeout != 30*time.Second || ok.Run.Duration <= 0 {
		t.Errorf("run: %+v %+v", ok, ok.Run)
	}
	refused := ev[1]
	if refused.Decision != sandbox.AuditDeny || refused.Run.Outcome != "error" || refused.Run.ErrorKind != sandbox.KindInvalidRequest ||
		refused.Run.Error == "" || refused.Run.CodeSHA256 != hexSHA("print(2)") {
		t.Errorf("refused run: %+v %+v", refused, refused.Run)
	}
	if c := ev[2]; c.Session != info.ID || c.Decision != sandbox.AuditAllow || c.Lifecycle.Tier != sandbox.TierNano {
		t.Errorf("session create: %+v %+v", c, c.Lifecycle)
	}
	if r := ev[3]; r.Session != info.ID || r.Run.Tier != sandbox.TierNano || r.Run.Outcome != "exit_nonzero" || r.Run.ExitCode != 1 ||
		r.Run.Reasons[0] != "nano: session "+info.ID {
		t.Errorf("session run: %+v %+v", r, r.Run)
	}
	if c := ev[4]; c.Session != info.ID || c.Lifecycle.Reason != "closed by request" || c.Lifecycle.Runs != 1 {
		t.Errorf("session close: %+v %+v", c, c.Lifecycle)
	}
	if c := ev[6]; c.Session != open.ID || c.Lifecycle.Reason != "daemon shutdown" {
		t.Errorf("shutdown close: %+v %+v", c, c.Lifecycle)
	}
	if !sink.closed {
		t.Error("Manager.Close did not close the sink")
	}
}

func TestManagerAuditsIdleExpiry(t *testing.T) {
	sink := &recordingSink{}
	m, _ := newManager(t, sandbox.ManagerOptions{Audit: sink, SessionIdle: 50 * time.Millisecond})
	info, err := m.CreateSession(context.Background(), sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range sink.all() {
			if e.Kind == sandbox.AuditSessionExpire && e.Session == info.ID && e.Lifecycle.Reason == "idle for 50ms" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no expiry event: %+v", sink.all())
}

func TestQueryAuditWithoutLog(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{Audit: &recordingSink{}})
	if _, err := m.QueryAudit(context.Background(), sandbox.AuditFilter{}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("got %v, want not_found", err)
	}
}
