package daemon_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"slices"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/config"
)

// TestDaemonAudits: runs and sessions served by the whole daemon (real nano) land in the audit
// log with the code's hash and the routing reasons, GET /v1/audit finds them, and the log
// verifies.
func TestDaemonAudits(t *testing.T) {
	dir := t.TempDir()
	c, _ := startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled = heavy.Off }))
		c.Audit.Dir = dir
		c.Audit.CheckpointRecords = 2
	})
	ctx := context.Background()
	code := "import json\nprint(json.dumps({'audited': True}))\n"
	res, err := c.Run(ctx, api.RunRequest{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "1/0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	runs, err := c.Audit(ctx, client.AuditQuery{Kind: "run"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(code))
	i := slices.IndexFunc(runs, func(r api.AuditRecord) bool { return r.Run.CodeSHA256 == hex.EncodeToString(sum[:]) })
	if i < 0 {
		t.Fatalf("no run record with the code's hash among %+v", runs)
	}
	r := runs[i]
	if r.Decision != "allow" || r.Session != "" || r.Run.Tier != "nano" || r.Run.Outcome != "ok" ||
		!slices.Equal(r.Run.Reasons, res.Routing.Reasons) || len(r.Run.Reasons) == 0 ||
		r.Run.Limits == nil || r.Run.Limits.TimeoutMS != 30000 || r.Run.CodeBytes != len(code) || r.Run.DurationMS <= 0 {
		t.Errorf("run record %+v %+v, result routing %+v", r, r.Run, res.Routing)
	}

	recs, err := c.Audit(ctx, client.AuditQuery{Session: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
	}
	if !slices.Equal(kinds, []string{"session.create", "run", "session.close"}) {
		t.Fatalf("session records %v", kinds)
	}
	if run := recs[1].Run; run.Outcome != "exception" || run.Exception != "ZeroDivisionError" || run.ExitCode != 1 ||
		run.Reasons[0] != "nano: session "+s.ID {
		t.Errorf("session run %+v", run)
	}
	if l := recs[2].Lifecycle; l.Reason != "closed by request" || l.Runs != 1 {
		t.Errorf("session close %+v", l)
	}

	rep, err := audit.Verify(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Records < 4 || rep.Checkpoints < 2 {
		t.Fatalf("verify: %v", rep)
	}
}
