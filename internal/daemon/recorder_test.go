package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/egress"
)

// TestEgressRecorder: the gateway's decisions and alerts become audit records, in the log's
// common decision words, with credential headers masked.
func TestEgressRecorder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := audit.Open(dir, audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := egressRecorder(l, slog.New(slog.DiscardHandler), func(session string) string {
		if session == "sb_1" {
			return "acme"
		}
		return ""
	})
	ev := egress.Event{Session: "sb_1", Profile: "default", Mode: egress.ModeEnforce, Method: "POST",
		URL: "https://evil.test/upload", Addr: "203.0.113.9:443", Status: 403, Decision: "denied",
		Rules: []string{"default deny"}, Reason: "evil.test is not allowed",
		Headers:  map[string]string{"Authorization": "Bearer sk-secret", "Content-Type": "text/plain"},
		Duration: 1500 * time.Microsecond}
	rec.Egress(ev)
	ev.Decision, ev.Status = "redacted", 200
	rec.Egress(ev)
	rec.Alert(egress.Alert{Session: "sb_1", Profile: "default", Violations: 3, Window: "5m0s", Last: ev, Ended: true})
	l.Close()

	recs, err := audit.QueryFile(context.Background(), filepath.Join(dir, audit.RecordsFile), audit.Filter{})
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	if strings.Contains(string(recs[0]), "sk-secret") {
		t.Errorf("a credential reached the log: %s", recs[0])
	}
	var denied, redacted, alert audit.Record
	json.Unmarshal(recs[0], &denied)
	json.Unmarshal(recs[1], &redacted)
	json.Unmarshal(recs[2], &alert)
	if denied.Tenant != "acme" || redacted.Tenant != "acme" || alert.Tenant != "acme" {
		t.Errorf("the records do not name the session's tenant: %q %q %q", denied.Tenant, redacted.Tenant, alert.Tenant)
	}
	if e := denied.Egress; denied.Kind != audit.KindEgress || denied.Decision != "deny" || denied.Session != "sb_1" ||
		e.Decision != "denied" || e.Status != 403 || e.Addr != "203.0.113.9:443" || e.Profile != "default" || e.Mode != "enforce" ||
		e.Rules[0] != "default deny" || e.Reason == "" || e.DurationMS != 1.5 || e.Headers["Authorization"] != "Bearer [REDACTED]" {
		t.Errorf("denied: %+v %+v", denied, e)
	}
	if redacted.Decision != "redact" {
		t.Errorf("redacted: %+v", redacted)
	}
	if a := alert.Alert; alert.Kind != audit.KindAlert || alert.Session != "sb_1" || a.Source != "egress" || a.Violations != 3 ||
		!a.Ended || !strings.Contains(a.Message, "https://evil.test/upload") {
		t.Errorf("alert: %+v %+v", alert, a)
	}
	if r, _ := audit.Verify(context.Background(), dir, ""); !r.OK() {
		t.Errorf("verify: %v", r)
	}
	for in, want := range map[string]string{"allowed": "allow", "failed": "allow", "denied": "deny", "blocked": "deny",
		"refused": "deny", "redacted": "redact", "warned": "warn"} {
		if got := egressDecision(in); got != want {
			t.Errorf("egressDecision(%q) = %q, want %q", in, got, want)
		}
	}
}
