package heavy

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// heavy.snapshot_release_after: 10 s unless set, 0 turns the release off, and a negative value
// is refused saying what 0 means.
func TestConfigSnapshotReleaseAfter(t *testing.T) {
	t.Parallel()
	var opts Options
	DefaultConfig().ApplySnapshots(&opts)
	if opts.SnapshotReleaseIdle != 10*time.Second {
		t.Errorf("default release after %v, want 10s", opts.SnapshotReleaseIdle)
	}
	off := DefaultConfig()
	off.SnapshotReleaseAfter = 0
	if err := off.Validate(); err != nil {
		t.Fatalf("0: %v", err)
	}
	off.ApplySnapshots(&opts)
	if opts.SnapshotReleaseIdle != 0 {
		t.Errorf("0 gave release after %v", opts.SnapshotReleaseIdle)
	}
	bad := DefaultConfig()
	bad.SnapshotReleaseAfter = config.Duration(-time.Second)
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "heavy.snapshot_release_after must not be negative") ||
		!strings.Contains(err.Error(), "0 keeps") {
		t.Errorf("negative: %v", err)
	}
}

// heavy.share_template_pages: on unless set false, read from the daemon's configuration.
func TestConfigShareTemplatePages(t *testing.T) {
	t.Parallel()
	if !DefaultConfig().TemplateSharing() {
		t.Error("template sharing is off by default")
	}
	var c config.Config
	if err := Configure(&c, func(h *Config) { off := false; h.ShareTemplatePages = &off }); err != nil {
		t.Fatal(err)
	}
	h, err := ConfigFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	if h.TemplateSharing() {
		t.Error("share_template_pages: false left sharing on")
	}
}
