package daemon_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func requireHeavy(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
}

// waitHeadDurable waits until a session's head step is durable (a heavy session's latest step is
// checkpointed once the session rests).
func waitHeadDurable(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := c.Steps(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range l.Steps {
			if st.ID == l.Head && st.Snapshot.State == "durable" {
				return st.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: its head %s is not durable after 90s: %+v", id, l.Head, l.Steps)
		}
	}
}

// A live heavy session (never paused) survives kill -9 of its daemon: its latest step became
// durable behind its result, and the restarted daemon resumes it there with its variables and
// files (issue 16: "kill -9 of the daemon with ... two live sessions").
func TestLiveHeavySessionSurvivesKill(t *testing.T) {
	requireHeavy(t)
	dir := t.TempDir()
	c, cmd := startTTDaemon(t, dir, ttHeavyEnv+"=1")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Env: map[string]string{"TOKEN": "tok-0a1b2c3d4e5f6071"}})
	if err != nil {
		t.Fatal(err)
	}
	ttRun(t, c, s.ID, "x = 41\nopen('/home/user/f.txt', 'w').write('heavy file')")
	head := ttRun(t, c, s.ID, "x += 1").Step
	if got := waitHeadDurable(t, c, s.ID); got != head {
		t.Fatalf("durable head %s, want %s", got, head)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	c2, _ := startTTDaemon(t, dir, ttHeavyEnv+"=1")
	res := ttRun(t, c2, s.ID, "print(x, open('/home/user/f.txt').read())")
	if res.Stdout != "42 heavy file\n" {
		t.Fatalf("the live heavy session after kill -9: %q, want \"42 heavy file\"", res.Stdout)
	}
	l, err := c2.Steps(ctx, s.ID)
	if err != nil || len(l.Steps) != 3 || l.Steps[2].Parent != head {
		t.Fatalf("steps after the restart: %+v %v", l, err)
	}
}
