package cli_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/setup"
)

func TestSetupPassesOptions(t *testing.T) {
	dir := t.TempDir()
	var got setup.Options
	var gotDir string
	err := cli.Setup(context.Background(), cli.SetupOptions{
		DataDir: dir, Source: "source", Force: true, Out: &bytes.Buffer{},
		Run: func(_ context.Context, cfg config.Config, o setup.Options, _ io.Writer) error {
			got, gotDir = o, cfg.DataDir
			return nil
		},
	})
	if err != nil || got.NanoSource != "source" || !got.Force || gotDir != dir {
		t.Errorf("setup got %+v in %q (%v)", got, gotDir, err)
	}
}
