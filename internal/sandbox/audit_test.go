package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
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

// audited is newManager's Manager behind the audit decorator, recording into sink.
func audited(t *testing.T, sink sandbox.AuditSink, opts sandbox.ManagerOptions) *sandbox.Audited {
	t.Helper()
	m, _ := newManager(t, opts)
	return sandbox.WithAudit(m, sink)
}

func hexSHA(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

func TestManagerAudits(t *testing.T) {
	sink := &recordingSink{}
	m := audited(t, sink, sandbox.ManagerOptions{SessionIdle: time.Hour})
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
	if ok.Decision != sandbox.AuditAllow || ok.Run.CodeSHA256 != hexSHA("print(1)") || ok.Run.Tier != tierNano ||
		len(ok.Run.Reasons) != 1 || ok.Run.Outcome != "ok" || ok.Run.Limits.Timeout != 30*time.Second || ok.Run.Duration <= 0 {
		t.Errorf("run: %+v %+v", ok, ok.Run)
	}
	refused := ev[1]
	if refused.Decision != sandbox.AuditDeny || refused.Run.Outcome != "error" || refused.Run.ErrorKind != sandbox.KindInvalidRequest ||
		refused.Run.Error == "" || refused.Run.CodeSHA256 != hexSHA("print(2)") {
		t.Errorf("refused run: %+v %+v", refused, refused.Run)
	}
	if c := ev[2]; c.Session != info.ID || c.Decision != sandbox.AuditAllow || c.Lifecycle.Tier != tierNano {
		t.Errorf("session create: %+v %+v", c, c.Lifecycle)
	}
	if r := ev[3]; r.Session != info.ID || r.Run.Tier != tierNano || r.Run.Outcome != "exit_nonzero" || r.Run.ExitCode != 1 ||
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
	m := audited(t, sink, sandbox.ManagerOptions{SessionIdle: 50 * time.Millisecond})
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
	m := audited(t, &recordingSink{}, sandbox.ManagerOptions{})
	if _, err := m.QueryAudit(context.Background(), sandbox.AuditFilter{}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("got %v, want not_found", err)
	}
}

// fakeGateway keeps intents and reloads its policy as told.
type fakeGateway struct{ reloadErr error }

// Interface guards.
var (
	_ sandbox.Intents        = (*fakeGateway)(nil)
	_ sandbox.PolicyReloader = (*fakeGateway)(nil)
)

func (g *fakeGateway) SetIntent(_, _, name string, ttl time.Duration) (time.Time, error) {
	if name != "weather-lookup" {
		return time.Time{}, errors.New("no intent " + name + " in the profile")
	}
	return time.Date(2026, 11, 22, 8, 50, 0, 0, time.UTC), nil
}
func (g *fakeGateway) ClearIntent(string)                {}
func (g *fakeGateway) Intent(string) (string, time.Time) { return "", time.Time{} }
func (g *fakeGateway) Forget(string)                     {}
func (g *fakeGateway) ReloadPolicy() ([]string, error) {
	return []string{"default", "strict"}, g.reloadErr
}

func TestManagerAuditsPolicyChanges(t *testing.T) {
	sink, gw := &recordingSink{}, &fakeGateway{}
	inner, err := sandbox.NewManager(sandbox.ManagerOptions{
		Runtimes: []sandbox.Runtime{runtimetest.NewFake(capsOf(tierHeavy))},
		Egress:   gw,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := sandbox.WithAudit(inner, sink)
	defer m.Close()
	info, err := m.CreateSession(context.Background(), sandbox.SessionOptions{Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetIntent(info.ID, "weather-lookup", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetIntent(info.ID, "exfiltrate", 0); err == nil {
		t.Fatal("an unknown intent was set")
	}
	if err := m.ClearIntent(info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReloadEgressPolicy(); err != nil {
		t.Fatal(err)
	}
	gw.reloadErr = errors.New("strict.yaml line 3: unknown key")
	if _, err := m.ReloadEgressPolicy(); err == nil {
		t.Fatal("a broken policy was reloaded")
	}
	type change struct{ session, decision, summary, err string }
	var got []change
	for _, e := range sink.all() {
		if e.Kind == sandbox.AuditSessionCreate {
			if !e.Lifecycle.Network || e.Lifecycle.EgressProfile != sandbox.DefaultEgressProfile {
				t.Errorf("session create %+v", e.Lifecycle)
			}
		}
		if e.Kind == sandbox.AuditPolicyChange {
			got = append(got, change{e.Session, e.Decision, e.Policy.Summary, e.Policy.Error})
		}
	}
	want := []change{
		{info.ID, "allow", "intent weather-lookup set until 2026-11-22T08:50:00Z", ""},
		{info.ID, "deny", "intent exfiltrate refused", "no intent exfiltrate in the profile"},
		{info.ID, "allow", "intent cleared", ""},
		{"", "allow", "egress profiles reloaded: default, strict", ""},
		{"", "deny", "egress profiles not reloaded; the old ones stay", "strict.yaml line 3: unknown key"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("policy changes\n got %q\nwant %q", got, want)
	}
}
