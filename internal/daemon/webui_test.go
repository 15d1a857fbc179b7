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
// against the whole daemon with the real nano tier: log in, the sessions page, a session, the
// audit log and its verification, and the refusals (a change without the cookie, with a bad CSRF
// token, or posted from another site). testdata/console.cjs is the browser's side.
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
	for _, code := range []string{"x = 1", "y = [i * i for i in range(10)]\nprint(sum(y))", "x += 1\nprint(x)"} {
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
	} else {
		t.Log("no heavy tier here (runsc or its image missing): the chart is not checked")
	}
	// Where a tier keeps a snapshot per step, the step pages show variables and the rewind
	// button; the browser then checks them.
	can := func(t sandbox.Tier) string {
		if rt, ok := m.Runtime(t); ok && rt.Capabilities().Snapshot && rt.Capabilities().Rewind {
			return "1"
		}
		return "0"
	}
	timeTravel, chartVars := can(nano.Tier), can(heavy.Tier)

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
		"UI_CHART="+chart, "UI_TIMETRAVEL="+timeTravel, "UI_CHART_VARS="+chartVars)
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
