package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/httpapi"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// newAuditEnv is newEnv with an audit log.
func newAuditEnv(t *testing.T) (*env, *audit.Log) {
	t.Helper()
	al, err := audit.Open(filepath.Join(t.TempDir(), "audit"), audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rt := newFake()
	p := testPolicy()
	core, err := sandbox.NewManager(sandbox.ManagerOptions{
		Runtimes: []sandbox.Runtime{rt},
		Policy:   &p,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := sandbox.WithAudit(core, al)
	t.Cleanup(func() { m.Close() })
	srv, err := httpapi.New(httpapi.Options{Engine: m, APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return &env{url: hs.URL, srv: srv, rt: rt, m: core, c: c}, al
}

func TestAuditQuery(t *testing.T) {
	t.Parallel()
	e, al := newAuditEnv(t)
	ctx := context.Background()
	before := time.Now().UTC()
	if _, err := e.c.Run(ctx, api.RunRequest{Code: "print(1)"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Run(ctx, api.RunRequest{Code: "raise"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Run(ctx, api.RunRequest{Code: "print(1)", Timeout: 100000}); err == nil {
		t.Fatal("a timeout above the maximum was accepted")
	}
	s, err := e.c.CreateSession(ctx, api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.RunInSession(ctx, s.ID, api.RunRequest{Code: "timeout"}); err == nil {
		t.Fatal("no timeout")
	}
	if err := e.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	mid := time.Now().UTC()

	kinds := func(recs []api.AuditRecord) string {
		var k []string
		for _, r := range recs {
			k = append(k, r.Kind)
		}
		return strings.Join(k, " ")
	}
	for _, tc := range []struct {
		name string
		q    client.AuditQuery
		want string
	}{
		{"all", client.AuditQuery{}, "run run run session.create run session.close"},
		{"session", client.AuditQuery{Session: s.ID}, "session.create run session.close"},
		{"kind", client.AuditQuery{Kind: "run"}, "run run run run"},
		{"kind prefix", client.AuditQuery{Kind: "session"}, "session.create session.close"},
		{"decision", client.AuditQuery{Decision: "deny"}, "run"},
		{"limit keeps the most recent", client.AuditQuery{Limit: 2}, "run session.close"},
		{"since", client.AuditQuery{Since: mid}, ""},
		{"until", client.AuditQuery{Until: before}, ""},
		{"since and until", client.AuditQuery{Since: before, Until: mid, Kind: "run", Session: s.ID}, "run"},
	} {
		recs, err := e.c.Audit(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := kinds(recs); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}

	recs, _ := e.c.Audit(ctx, client.AuditQuery{Kind: "run"})
	if r := recs[1].Run; r.Outcome != "exception" || r.Exception != "ZeroDivisionError" || r.Tier != "nano" || len(r.Reasons) == 0 ||
		r.CodeSHA256 != fmt.Sprintf("%x", sha256.Sum256([]byte("raise"))) || r.Limits.TimeoutMS != 30000 {
		t.Errorf("run with an exception: %+v", r)
	}
	if r := recs[2]; r.Decision != "deny" || r.Run.ErrorKind != "invalid_request" {
		t.Errorf("refused run: %+v %+v", r, r.Run)
	}
	if r := recs[3]; r.Session != s.ID || r.Run.Outcome != "error" || r.Run.ErrorKind != "timeout" || r.Decision != "allow" {
		t.Errorf("session run: %+v %+v", r, r.Run)
	}

	// The answer carries each record byte for byte as the log holds it.
	status, _, body := e.do(t, "GET", "/v1/audit?limit=1", testKey, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var list struct{ Records []json.RawMessage }
	json.Unmarshal(body, &list)
	file, _ := os.ReadFile(filepath.Join(al.Dir(), audit.RecordsFile))
	lines := bytes.Split(bytes.TrimSpace(file), []byte("\n"))
	if len(list.Records) != 1 || !bytes.Equal(list.Records[0], lines[len(lines)-1]) {
		t.Errorf("record %s\nlog line %s", list.Records, lines[len(lines)-1])
	}
}

func TestAuditQueryRefusesBadFilters(t *testing.T) {
	t.Parallel()
	e, _ := newAuditEnv(t)
	for _, q := range []string{"limit=0", "limit=1001", "limit=ten", "since=yesterday", "until=2026-13-01T00:00:00Z",
		"sesion=sb_1", "kind=run&kind=egress"} {
		status, _, body := e.do(t, "GET", "/v1/audit?"+q, testKey, nil)
		if status != http.StatusBadRequest || errorBody(t, body).Error.Code != "invalid_request" {
			t.Errorf("%s: status %d %s", q, status, body)
		}
	}
	if status, _, _ := e.do(t, "GET", "/v1/audit", "", nil); status != http.StatusUnauthorized {
		t.Errorf("without a key: status %d", status)
	}
	// A daemon without an audit log says so.
	status, _, body := newEnv(t).do(t, "GET", "/v1/audit", testKey, nil)
	if status != http.StatusNotFound || !strings.Contains(string(body), "audit log") {
		t.Errorf("no audit log: status %d %s", status, body)
	}
}

// TestAuditRecordWireType: every kind of record the log writes decodes into api.AuditRecord with
// no field left over, and encodes back to the same JSON: the wire type mirrors the log's.
func TestAuditRecordWireType(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := audit.Open(dir, audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lim := &audit.Limits{TimeoutMS: 1, MemoryBytes: 2, StdoutBytes: 3, StderrBytes: 4, FilesBytes: 5}
	for _, r := range []audit.Record{
		{Kind: audit.KindRun, Session: "sb_1", Decision: "allow", Run: &audit.Run{CodeSHA256: "ab", CodeBytes: 1, Tier: "heavy",
			Reasons: []string{"r"}, Limits: lim, Packages: []string{"pandas"}, Image: "img", Network: true, EgressProfile: "default",
			Outcome: "error", Exception: "E",
			ExitCode: 1, ErrorKind: "timeout", Error: "slow", DurationMS: 1.5}},
		{Kind: audit.KindSessionClose, Session: "sb_1", Lifecycle: &audit.Lifecycle{Tier: "nano", Limits: lim, Packages: []string{"x"},
			Image: "i", Network: true, EgressProfile: "strict", Reason: "idle", Runs: 2, AgeMS: 3, ErrorKind: "k", Error: "e"}},
		{Kind: audit.KindEgress, Decision: "deny", Egress: &audit.Egress{Method: "GET", URL: "https://x/", Addr: "1.2.3.4:443", Status: 403,
			Decision: "denied", Profile: "p", Mode: "enforce", Intent: "i", Rules: []string{"r"}, Detectors: []string{"d"}, Reason: "why",
			Headers: map[string]string{"A": "b"}, BodyExcerpt: "x", DurationMS: 2}},
		{Kind: audit.KindPolicyChange, Policy: &audit.Policy{Actor: "a", Summary: "s", Error: "e", Before: json.RawMessage(`{"a":1}`), After: json.RawMessage(`[2]`)}},
		{Kind: audit.KindAlert, Alert: &audit.Alert{Source: "egress", Message: "m", Profile: "p", Violations: 3, Window: "5m0s", Ended: true}},
		{Kind: audit.KindRepair, Repair: &audit.Repair{Line: 1, Bytes: 2, SHA256: "c", Excerpt: "e", Reason: "r"}},
	} {
		if err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := l.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, raw := range recs {
		var w api.AuditRecord
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&w); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		back, _ := json.Marshal(w)
		var a, b any
		json.Unmarshal(raw, &a)
		json.Unmarshal(back, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("record %s\nthrough api.AuditRecord %s", raw, back)
		}
	}
}
