package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Heavy sessions outlive a daemon that stops: one paused by request, one live (paused by the
// shutdown); the next daemon on the same directories resumes both on their next run, with their
// variables and files.
func TestHeavySessionsSurviveRestart(t *testing.T) {
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	dir := t.TempDir()
	cfg := ttConfig(t, dir)
	warm := 0
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) {
		h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, filepath.Join(dir, "heavy")
	}))
	log := testLog(t)
	ctx := context.Background()
	m1, err := daemon.NewManager(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	run := func(m *sandbox.Audited, id, code string) string {
		t.Helper()
		res, err := m.RunInSession(ctx, id, &sandbox.RunRequest{Code: code, Tier: heavy.Tier, Limits: sandbox.Limits{Timeout: 60 * time.Second}})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.Error != nil {
			t.Fatalf("%q: %+v %s", code, res.Error, res.Stderr)
		}
		return res.Stdout
	}
	var ids []string
	for i := range 2 {
		info, err := m1.CreateSession(ctx, sandbox.SessionOptions{Tier: heavy.Tier})
		if err != nil {
			m1.Close()
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
		run(m1, info.ID, "x = "+string(rune('1'+i))+"\nopen('/home/user/f.txt', 'w').write('file %d' % x)")
	}
	if _, err := m1.Pause(ctx, ids[0]); err != nil {
		m1.Close()
		t.Fatal(err)
	}
	m1.Close()

	m2, err := daemon.NewManager(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	for i, id := range ids {
		want := "file " + string(rune('1'+i)) + " " + string(rune('1'+i)) + "\n"
		if got := run(m2, id, "print(open('/home/user/f.txt').read(), x)"); got != want {
			t.Errorf("session %s after the restart: %q, want %q", id, got, want)
		}
	}
}
