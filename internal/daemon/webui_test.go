package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// shotsDir is where the browser test's screenshots go: $AGENTBOX_UI_SHOTS, or a directory the
// test makes and names in its log (kept, for a person to look at).
func shotsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("AGENTBOX_UI_SHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "agentbox-ui-shots-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWebConsole drives the web console at /ui/ with Debian's Chromium (playwright-core, Node 22)
// against the whole daemon with the real nano tier, and heavy where this machine has it: log in,
// the sessions page, a session's timeline, a step (code, output; its variables and the diff with
// its parent where the tier snapshots steps), a heavy step's chart inline, a heavy step run in a
// code context (its page offers the contexts; switching shows the other one's variables; an
// unknown context is a 404 saying so), a rewind (refused with a
// tampered token, then done) and the branch the next run opens, the audit log and its
// verification, and the refusals (a change without the cookie, with a bad CSRF token, or posted
// from another site). testdata/console.cjs is the browser's side; the screenshots go to
// $AGENTBOX_UI_SHOTS or a directory the log names.
func TestWebConsole(t *testing.T) {
	b := testenv.RequireBrowser(t)
	testenv.RequireRoot(t)
	withHeavy := heavyReady()
	url, m := consoleDaemon(t, withHeavy)
	c, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"x = 1", "y = [i * i for i in range(10)]\nprint(sum(y))\n_ = open('squares.txt', 'w').write(str(y))", "x += 1\nprint(x)"} {
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: code}); err != nil {
			t.Fatal(err)
		}
	}

	// A chart needs the heavy tier (matplotlib); a daemon without it shows the rest.
	var chart string
	if withHeavy {
		h, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy"})
		if err != nil {
			t.Fatal(err)
		}
		chart = h.ID
		for _, code := range []string{
			"import pandas as pd\ndf = pd.DataFrame({'x': range(10), 'y': [i * i for i in range(10)]})",
			"import matplotlib.pyplot as plt\nplt.plot(df.x, df.y, marker='o')\nplt.title('y = x squared')\nplt.show()",
		} {
			res, err := c.RunInSession(ctx, h.ID, api.RunRequest{Code: code, Timeout: 120})
			if err != nil || res.Error != nil {
				t.Fatalf("heavy step: %v %+v", err, res)
			}
		}
		// A third step in a code context of its own (contexts are made through the E2B code
		// interpreter's port; here through the core): its page offers the session's contexts.
		if _, err := m.As(sandbox.Caller{Admin: true}).RunInSession(ctx, h.ID, &sandbox.RunRequest{Context: "beta", Limits: sandbox.Limits{Timeout: 120 * time.Second},
			Code: "import pandas as pd\nscores = pd.Series([3, 1, 2], name='scores')\nlabel = 'in beta'"}); err != nil {
			t.Fatalf("heavy step in context beta: %v", err)
		}
	} else {
		t.Log("no heavy tier here (runsc or its image missing): the chart and code contexts are not checked")
	}
	// Where a tier keeps a snapshot per step, the step pages show variables and the rewind
	// button; the browser checks them there, and rewinds a session of the first such tier
	// (nano, else heavy) and sees the branch the next run opens.
	nanoTT := snapshotted(t, m, s.ID)
	heavyTT := chart != "" && snapshotted(t, m, chart)
	flag := map[bool]string{true: "1", false: "0"}
	var rewind []string
	switch {
	case nanoTT:
		rewind = []string{"UI_REWIND_SESSION=" + s.ID, "UI_REWIND_CODE=print(x, 'y' in globals())", "UI_REWIND_WANT=^1 False", "UI_REWIND_ROWS=3"}
	case heavyTT:
		rewind = []string{"UI_REWIND_SESSION=" + chart, "UI_REWIND_CODE=print(len(df), 'plt' in globals())", "UI_REWIND_WANT=^10 False", "UI_REWIND_ROWS=3"}
	default:
		for _, tier := range m.Tiers() {
			if rt, ok := m.Runtime(tier); ok && rt.Capabilities().Rewind {
				// A tier that can rewind but kept no snapshot here: an image built before its
				// guest agent could (agentbox setup brings the agent up to date).
				testenv.Skip(t, "the "+string(tier)+" tier rewinds, but no step was snapshotted here (an image whose guest agent predates snapshots? run agentbox setup)")
			}
		}
		t.Log("no tier here keeps snapshots per step: variables, rewind and the branch are not checked")
	}
	shots := shotsDir(t)
	t.Logf("screenshots in %s", shots)
	script, err := filepath.Abs("testdata/console.cjs")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.Node, script)
	cmd.Env = append(b.Env(), "UI_URL="+url, "UI_KEY="+key, "UI_SESSION="+s.ID, "UI_SHOTS="+shots, "UI_PROFILE="+t.TempDir(),
		"UI_CHART="+chart, "UI_TIMETRAVEL="+flag[nanoTT], "UI_CHART_VARS="+flag[heavyTT])
	cmd.Env = append(cmd.Env, rewind...)
	out, err := cmd.CombinedOutput()
	t.Logf("browser:\n%s", out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
}

// heavyReady reports whether this machine has the heavy tier's runsc and data-science image.
func heavyReady() bool {
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		return false
	}
	_, err := l.Images().Get("python-datascience")
	return err == nil
}

// consoleDaemon starts the whole daemon (real nano, heavy when withHeavy) and returns its URL and
// its engine.
func consoleDaemon(t *testing.T, withHeavy bool) (string, *sandbox.Audited) {
	t.Helper()
	cfg := config.Default()
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	cfg.ArtifactsDir, cfg.Audit.Dir = t.TempDir(), t.TempDir()
	cfg.Sessions.Dir = t.TempDir() // sessions that outlive the daemon: this test's own
	stateDir, warm := t.TempDir(), 1
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) {
		h.StateDir = stateDir
		if withHeavy {
			h.Enabled, h.Warm = heavy.On, &warm
		} else {
			h.Enabled = heavy.Off
		}
	}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(doors)
	t.Cleanup(func() {
		ts.Close()
		m.Close()
	})
	return ts.URL, m
}

// snapshotted waits until the snapshots of session id's steps are taken (behind each run's
// result) and reports whether every one was kept. A session whose tier keeps none has none.
func snapshotted(t *testing.T, m *sandbox.Audited, id string) bool {
	t.Helper()
	v := m.As(sandbox.Caller{Admin: true})
	info, err := v.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	if rt, ok := m.Runtime(info.Tier); !ok || !rt.Capabilities().Snapshot {
		return false
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		steps, _, err := v.Steps(id)
		if err != nil {
			t.Fatal(err)
		}
		settled, kept := true, len(steps) > 0
		for _, st := range steps {
			switch st.Snapshot.State {
			case sandbox.SnapshotKept, sandbox.SnapshotDurable:
			case sandbox.SnapshotDropped:
				kept = false
			default: // none or pending: not taken yet
				settled = false
			}
		}
		if settled && kept {
			return true
		}
		if settled || time.Now().After(deadline) {
			for _, st := range steps {
				t.Logf("session %s step %d: snapshot %s %s", id, st.Seq, st.Snapshot.State, st.Snapshot.Reason)
			}
			return false
		}
	}
}
