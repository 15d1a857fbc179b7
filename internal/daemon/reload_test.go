package daemon_test

import (
	"context"
	"errors"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
)

// Reloading the egress policy takes a new profile; a broken file is refused with its line and the
// profiles in force stay; the change is in the audit log.
func TestEgressPolicyReload(t *testing.T) {
	profiles := t.TempDir()
	c, _ := startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled = heavy.Off }))
		c.Egress.Dir = t.TempDir()
		c.Egress.ProfilesDir = profiles
	})
	ctx := context.Background()
	names, err := c.ReloadEgressPolicy(ctx)
	if err != nil || strings.Join(names, " ") != "api-only default strict" {
		t.Fatalf("first reload: %v %v", names, err)
	}
	os.WriteFile(filepath.Join(profiles, "team.yaml"), []byte("name: team\nallow:\n  - api.team.test\n"), 0o644)
	if names, err = c.ReloadEgressPolicy(ctx); err != nil || !strings.Contains(strings.Join(names, " "), "team") {
		t.Fatalf("a new profile: %v %v", names, err)
	}
	os.WriteFile(filepath.Join(profiles, "broken.yaml"), []byte("name: broken\nallow:\n  - domain: a.test\n    ports: [99999]\n"), 0o644)
	_, err = c.ReloadEgressPolicy(ctx)
	var e *client.Error
	if !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "broken.yaml:3") || !strings.Contains(e.Message, "old one stays") {
		t.Fatalf("a broken file: %v", err)
	}
	recs, err := c.Audit(ctx, client.AuditQuery{Kind: "policy.change"})
	if err != nil || len(recs) < 2 {
		t.Fatalf("policy changes in the audit log: %d %v", len(recs), err)
	}
}
