package setup

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
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
