package webui_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestPreview(t *testing.T) {
	if os.Getenv("PREVIEW") == "" {
		t.Skip()
	}
	c := newConsoleOf(t, memTier{})
	ctx := context.Background()
	key, _ := c.tenantKey(t, "acme", auth.ScopeSessions, auth.ScopeAuditRead)
	v := c.m.As(sandbox.Caller{Tenant: "acme", Agent: "notebook-agent"})
	s, _ := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	for _, code := range []string{"import math\nx = 1", "y = 2\nplot", "x = 3", "z = 4"} {
		v.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: code})
	}
	steps, _, _ := v.Steps(s.ID)
	v.Rewind(ctx, s.ID, steps[1].ID)
	v.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: "w = 10"})
	v.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: "w = 11"})
	v.Rewind(ctx, s.ID, steps[0].ID)
	v.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: "q = 5"})
	v.Fork(ctx, s.ID, steps[2].ID)
	cmd := exec.Command("node", "/tmp/preview.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH=/work/wt/h16ui/.cache/ui-tools/node_modules", "BASE="+c.srv.URL, "KEY="+key, "SID="+s.ID, "STEP="+steps[1].ID)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
}
