package cli_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

var fakePNG = []byte("\x89PNG\r\n\x1a\nnot really a picture")

// figureManager is a Manager over a fake tier whose runs make one figure, kept in an artifact
// store as the daemon keeps them.
func figureManager(t *testing.T) *sandbox.Audited {
	t.Helper()
	store, err := artifacts.Open(t.TempDir(), artifacts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Contained: true})
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		return &sandbox.Result{Stdout: "plotted\n", Artifacts: []sandbox.Artifact{
			{Name: "figure-1.png", MIME: "image/png", Size: int64(len(fakePNG)), Content: fakePNG}}}, nil
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{f}, Artifacts: store,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	am := sandbox.WithAudit(m, nil)
	t.Cleanup(func() { am.Close() })
	return am
}

// agentbox run says when the code made figures a terminal does not show, and --figures DIR saves
// them, through a daemon and with a local engine alike.
func TestRunFigures(t *testing.T) {
	m := figureManager(t)
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	local := func(context.Context, config.Config, *slog.Logger) (*sandbox.Audited, error) {
		return figureManager(t), nil
	}
	for _, where := range []struct {
		name string
		opts cli.RunOptions
	}{
		{"daemon", cli.RunOptions{URL: hs.URL, APIKey: key}},
		{"local", cli.RunOptions{Local: true, NewManager: local, DataDir: t.TempDir()}},
	} {
		t.Run(where.name, func(t *testing.T) {
			run := func(figures string) (int, string, string) {
				var out, errb bytes.Buffer
				opts := where.opts
				opts.File, opts.Stdin, opts.Stdout, opts.Stderr, opts.Figures = "-", strings.NewReader("plt.show()"), &out, &errb, figures
				return cli.RunCode(context.Background(), opts), out.String(), errb.String()
			}
			code, stdout, stderr := run("")
			if code != 0 || stdout != "plotted\n" || !strings.Contains(stderr, "1 figure(s) not shown here (figure-1.png): --figures DIR") {
				t.Errorf("without --figures: %d %q %q", code, stdout, stderr)
			}
			dir := filepath.Join(t.TempDir(), "charts")
			code, _, stderr = run(dir)
			b, err := os.ReadFile(filepath.Join(dir, "figure-1.png"))
			if code != 0 || err != nil || !bytes.Equal(b, fakePNG) || !strings.Contains(stderr, "saved "+filepath.Join(dir, "figure-1.png")) {
				t.Errorf("with --figures: %d %q %v", code, stderr, err)
			}
		})
	}
}
