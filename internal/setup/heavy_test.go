package setup

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// The heavy step for real, in the default data directory (where the runtime's tests look): the
// first run builds what is missing (runsc: minutes; the image: ~2 minutes), the second only
// checks.
func TestHeavyIdempotent(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Skip(t, "needs a Go toolchain to build runsc")
	}
	if testing.Short() {
		t.Skip("builds runsc and a Debian image the first time")
	}
	cfg := config.Default()
	ctx := context.Background()
	var out bytes.Buffer
	if err := Heavy(ctx, cfg, Options{}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("first run:\n%s", out.String())
	out.Reset()
	if err := Heavy(ctx, cfg, Options{}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runsc v", "nothing to build", "already built, cached"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("second run is not idempotent (no %q):\n%s", want, out.String())
		}
	}
}

// A data directory whose runsc the source tree built (patched, with its stamp) is current for an
// agentbox run outside the tree (a cluster node's setup task): it neither rebuilds nor puts
// upstream runsc in its place.
func TestRunscFromTheTreeIsCurrentElsewhere(t *testing.T) {
	dataDir := t.TempDir()
	l := heavy.LayoutFor(dataDir)
	dst := l.Runsc(heavy.RunscVersion)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho '" + heavy.RunscBuild + "'\necho 'runsc version " + heavy.RunscVersion + "'\n"
	if err := os.WriteFile(dst, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	stamp := "gvisor-patch 0123abcd\n"
	if err := os.WriteFile(dst+".build", []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "") // a build would fail at once: no go on PATH
	var out bytes.Buffer
	if err := buildRunsc(context.Background(), l, "", dataDir, false, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "nothing to build") {
		t.Errorf("setup outside the tree did not take the tree's runsc as current:\n%s", out.String())
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != script {
		t.Errorf("runsc was replaced: %q, %v", b, err)
	}
	if b, err := os.ReadFile(dst + ".build"); err != nil || string(b) != stamp {
		t.Errorf("the stamp was changed: %q, %v", b, err)
	}
}
