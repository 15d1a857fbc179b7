package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// restartHelperEnv, set to a data directory, makes TestRestartHelperProcess a daemon to kill.
const restartHelperEnv = "AGENTBOX_RESTART_HELPER_DATA"

// restartConfig is a daemon on dataDir with one toy tier (no sandboxes of its own to leave
// behind) and no egress gateway.
func restartConfig(dataDir string) (config.Config, []tierSpec) {
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.ArtifactsDir = filepath.Join(dataDir, "artifacts")
	off := false
	cfg.Egress.Enabled = &off
	toy := tierSpec{"toy", func(context.Context, wiring) (sandbox.Runtime, error) {
		return runtimetest.NewFake(sandbox.Capabilities{Tier: "toy", Sessions: true}), nil
	}}
	return cfg, []tierSpec{toy}
}

// TestRestartHelperProcess is the daemon TestRestartRecordsLostSessions kills: it opens two
// sessions of tenant acme and one of the daemon's own tenant, closes one, says which, and waits to
// be killed (or for its parent to go away).
func TestRestartHelperProcess(t *testing.T) {
	dataDir := os.Getenv(restartHelperEnv)
	if dataDir == "" {
		t.Skip("the daemon TestRestartRecordsLostSessions starts and kills")
	}
	cfg, specs := restartConfig(dataDir)
	m, err := newManager(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), specs)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	acme := sandbox.WithCaller(context.Background(), sandbox.Caller{Tenant: "acme", Agent: "bot-1"})
	var ids []string
	for _, ctx := range []context.Context{acme, acme, context.Background()} {
		info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: "toy"})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		ids = append(ids, info.ID)
	}
	if err := m.CloseSession(ids[1]); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("ready", ids[0], ids[1], ids[2])
	io.Copy(io.Discard, os.Stdin) // until the parent kills this process, or goes away
	os.Exit(3)
}

// A daemon killed with sessions open: the next daemon on its directories records a daemon.restart
// listing them (tier, tenant, agent) and a session.close for each, not the session that was
// closed; a daemon shut down cleanly leaves nothing to record.
func TestRestartRecordsLostSessions(t *testing.T) {
	dataDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestartHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), restartHelperEnv+"="+dataDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") || strings.HasPrefix(sc.Text(), "error ") {
				lines <- sc.Text()
				return
			}
		}
		close(lines)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("the first daemon did not start within 60s")
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "ready" {
		t.Fatalf("the first daemon: %q", line)
	}
	lost1, closed, lost2 := f[1], f[2], f[3]
	var running runningState
	if b, err := os.ReadFile(filepath.Join(dataDir, "audit", RunningFile)); err != nil || json.Unmarshal(b, &running) != nil ||
		len(running.Sessions) != 2 || running.PID != cmd.Process.Pid {
		t.Fatalf("the running daemon's state: %s %v", b, err)
	}
	// kill -9: no shutdown at all. The kernel releases the audit log's lock.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	cfg, specs := restartConfig(dataDir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := newManager(context.Background(), cfg, log, specs)
	if err != nil {
		t.Fatal(err)
	}
	query := func(m *sandbox.Audited, f sandbox.AuditFilter) []api.AuditRecord {
		t.Helper()
		raw, err := m.QueryAudit(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]api.AuditRecord, len(raw))
		for i, r := range raw {
			if err := json.Unmarshal(r, &out[i]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	recs := query(m, sandbox.AuditFilter{Kind: "daemon.restart"})
	if len(recs) != 1 || recs[0].Restart == nil {
		t.Fatalf("daemon.restart records: %+v", recs)
	}
	r := recs[0].Restart
	if r.PreviousPID != cmd.Process.Pid || time.Since(r.PreviousStart) > time.Minute || len(r.Sessions) != 2 {
		t.Fatalf("restart %+v, want pid %d and sessions %s %s", r, cmd.Process.Pid, lost1, lost2)
	}
	got := map[string]api.AuditLostSession{}
	for _, s := range r.Sessions {
		got[s.ID] = s
	}
	if s := got[lost1]; s.Tier != "toy" || s.Tenant != "acme" || s.Agent != "bot-1" || s.Created.IsZero() {
		t.Errorf("lost session %s: %+v", lost1, s)
	}
	if s, ok := got[lost2]; !ok || s.Tier != "toy" || s.Tenant != "" {
		t.Errorf("lost session %s: %+v (%v)", lost2, s, ok)
	}
	if _, ok := got[closed]; ok {
		t.Errorf("the session closed before the kill is listed as lost")
	}
	// Each lost session's history ends, and its tenant finds the end among its own records.
	ends := query(m, sandbox.AuditFilter{Session: lost1})
	if last := ends[len(ends)-1]; len(ends) != 2 || ends[0].Kind != "session.create" || last.Kind != "session.close" ||
		last.Tenant != "acme" || last.Agent != "bot-1" || last.Lifecycle == nil || !strings.HasPrefix(last.Lifecycle.Reason, "lost: ") ||
		last.Lifecycle.Tier != "toy" {
		t.Errorf("records of lost session %s: %+v", lost1, ends)
	}
	if acme := query(m, sandbox.AuditFilter{Tenant: "acme", Kind: "session.close"}); len(acme) != 2 {
		t.Errorf("acme's session.close records: %d, want the closed one and the lost one", len(acme))
	}

	// A clean shutdown, with a session open: the next start records no restart.
	if _, err := m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "toy"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "audit", RunningFile)); !os.IsNotExist(err) {
		t.Fatalf("the running state after a clean shutdown: %v", err)
	}
	m, err = newManager(context.Background(), cfg, log, specs)
	if err != nil {
		t.Fatal(err)
	}
	if recs := query(m, sandbox.AuditFilter{Kind: "daemon.restart"}); len(recs) != 1 {
		t.Errorf("%d daemon.restart records after a clean shutdown, want the one before", len(recs))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), filepath.Join(dataDir, "audit"), "")
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", rep, err)
	}
}
