package daemon_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
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
	url, _ := tenantDaemon(t)
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

	shots := shotsDir(t)
	t.Logf("screenshots in %s", shots)
	script, err := filepath.Abs("testdata/console.cjs")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.Node, script)
	cmd.Env = append(b.Env(), "UI_URL="+url, "UI_KEY="+key, "UI_SESSION="+s.ID, "UI_SHOTS="+shots, "UI_PROFILE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("browser:\n%s", out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
}
