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
	if running, err := readRunning(filepath.Join(dataDir, "audit", RunningFile)); err != nil || running == nil ||
		len(running.Sessions) != 2 || running.PID != cmd.Process.Pid {
		t.Fatalf("the running daemon's state: %+v %v", running, err)
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

// The running state is a journal: whatever the interleaving of creates, moves and closes, and of
// the rewrites that keep it short, the file read at any moment after they returned (as the next
// daemon reads it after a kill) holds exactly the sessions open, with their tiers; a clean
// shutdown removes it.
func TestRunningJournal(t *testing.T) {
	l, err := audit.Open(t.TempDir(), audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tr := trackRestarts(l, l, slog.New(slog.DiscardHandler), nil).(*restartTracker)
	tr.compactAt = 8 // rewrites all along
	ctx := context.Background()
	const goroutines, each = 8, 40
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				id := fmt.Sprintf("sb_%d_%d", g, i)
				tr.Audit(ctx, sandbox.AuditEvent{Kind: sandbox.AuditSessionCreate, Session: id, Tenant: "acme", Agent: "bot",
					Decision: sandbox.AuditAllow, Lifecycle: &sandbox.SessionAudit{Tier: "nano"}})
				if i%3 == 0 {
					tr.Audit(ctx, sandbox.AuditEvent{Kind: sandbox.AuditRun, Session: id, Decision: sandbox.AuditAllow,
						Run: &sandbox.RunAudit{Tier: "heavy"}})
				}
				if i%4 != 3 {
					kind := sandbox.AuditSessionClose
					if i%4 == 0 {
						kind = sandbox.AuditSessionExpire
					}
					tr.Audit(ctx, sandbox.AuditEvent{Kind: kind, Session: id, Tenant: "acme", Lifecycle: &sandbox.SessionAudit{Tier: "heavy"}})
				}
			}
		}()
	}
	for range goroutines {
		<-done
	}
	want := map[string]string{}
	for g := range goroutines {
		for i := range each {
			if i%4 == 3 {
				tier := "nano"
				if i%3 == 0 {
					tier = "heavy"
				}
				want[fmt.Sprintf("sb_%d_%d", g, i)] = tier
			}
		}
	}
	path := filepath.Join(l.Dir(), RunningFile)
	check := func(when string) {
		t.Helper()
		s, err := readRunning(path)
		if err != nil || s == nil {
			t.Fatalf("%s: %v %v", when, s, err)
		}
		if s.PID != os.Getpid() {
			t.Errorf("%s: pid %d", when, s.PID)
		}
		got := map[string]string{}
		for _, ls := range s.Sessions {
			if ls.Tenant != "acme" || ls.Agent != "bot" || ls.Created.IsZero() {
				t.Errorf("%s: session %+v", when, ls)
			}
			got[ls.ID] = ls.Tier
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d sessions open, want %d", when, len(got), len(want))
		}
		for id, tier := range want {
			if got[id] != tier {
				t.Errorf("%s: session %s in %q, want %q", when, id, got[id], tier)
			}
		}
	}
	check("right after the changes") // a rewrite may be under way
	tr.done.Wait()
	check("after the rewrites")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// 8×40 creates, 8×14 moves, 8×30 closes (672 changes): the rewrites keep the journal near
	// four lines per open session (80), give or take the changes made during the last rename.
	if lines := strings.Count(string(b), "\n"); lines > 1+4*len(want)+100 {
		t.Errorf("the journal holds %d lines for %d open sessions: not rewritten", lines, len(want))
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after a clean shutdown: %v", p, err)
		}
	}
}

// readRunning replays a journal, reads the whole-file state of earlier daemons, and keeps what it
// could read of a journal whose last line a stopped machine tore.
func TestReadRunning(t *testing.T) {
	head := `{"pid":42,"started":"2026-11-28T20:00:00Z","sessions":[{"id":"sb_a","tier":"nano","tenant":"acme","created":"2026-11-28T20:00:01Z"}]}`
	for _, tc := range []struct {
		name, file string
		want       string // ids and tiers, in order
		err        bool
	}{
		{"the whole-file state of earlier daemons", head, "sb_a:nano", false},
		{"a snapshot alone", head + "\n", "sb_a:nano", false},
		{"opens, a move, a close", head + "\n" + `{"open":{"id":"sb_b","tier":"nano","created":"2026-11-28T20:00:02Z"}}` + "\n" +
			`{"move":"sb_b","tier":"heavy"}` + "\n" + `{"close":"sb_a"}` + "\n" + `{"open":{"id":"sb_c","tier":"heavy"}}` + "\n",
			"sb_b:heavy sb_c:heavy", false},
		{"a close or a move of a session not open", head + "\n" + `{"close":"sb_x"}` + "\n" + `{"move":"sb_y","tier":"heavy"}` + "\n",
			"sb_a:nano", false},
		{"a torn last line", head + "\n" + `{"open":{"id":"sb_b","tier":"nano"}}` + "\n" + `{"close":"sb_`, "sb_a:nano sb_b:nano", true},
		{"zeros after the last line", head + "\n" + `{"close":"sb_a"}` + "\n\x00\x00\x00", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), RunningFile)
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := readRunning(path)
			if (err != nil) != tc.err || s == nil {
				t.Fatalf("readRunning: %+v, %v; want an error: %v", s, err, tc.err)
			}
			var got []string
			for _, ls := range s.Sessions {
				got = append(got, ls.ID+":"+ls.Tier)
			}
			if strings.Join(got, " ") != tc.want || s.PID != 42 {
				t.Errorf("pid %d, sessions %q, want 42, %q", s.PID, got, tc.want)
			}
		})
	}
	if s, err := readRunning(filepath.Join(t.TempDir(), RunningFile)); s != nil || err != nil {
		t.Errorf("no file: %v %v, want nothing", s, err)
	}
	path := filepath.Join(t.TempDir(), RunningFile)
	os.WriteFile(path, []byte("{\"pid\":"), 0o600)
	if s, err := readRunning(path); s != nil || err == nil {
		t.Errorf("an unreadable snapshot: %v %v, want an error", s, err)
	}
}
