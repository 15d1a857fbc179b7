package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// heavyEngine is the heavy runtime as the heavy scenarios use it: heavy.Runtime in process, a
// fake in tests.
type heavyEngine interface {
	// NewSession opens a session with the default limits (the pool's).
	NewSession(ctx context.Context) (targetSession, error)
	// Pool reports the warm pool.
	Pool() heavy.PoolStats
	// SetWarm resizes the warm pool.
	SetWarm(n int)
	Close() error
}

// Interface guards.
var (
	_ heavyEngine   = (*runtimeEngine)(nil)
	_ targetSession = (*runtimeSession)(nil)
)

// runtimeEngine drives a heavy.Runtime in this process.
type runtimeEngine struct {
	rt     *heavy.Runtime
	limits sandbox.Limits
	log    *os.File
}

// heavyTimeout is the budget of one heavy cell: generous, for the compute snippets.
const heavyTimeout = 5 * time.Minute

// startHeavy starts a heavy runtime on the data directory's runsc and image, with a state
// directory of the bench's own (DATA_DIR/bench/heavy) so that it never touches a running daemon's
// sandboxes; its log goes to DATA_DIR/bench/heavy.log.
func startHeavy(ctx context.Context, o HeavyOptions, warm int, noRestore bool) (*runtimeEngine, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the heavy tier needs root (runsc): run `sudo bin/agentbox bench heavy`")
	}
	dir := filepath.Join(o.DataDir, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "heavy.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	limits, err := sandbox.DefaultPolicy().Apply(sandbox.Limits{Timeout: heavyTimeout})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if warm == 0 {
		warm = -1 // the runtime's zero value is its default pool size
	}
	rt, err := heavy.New(ctx, heavy.Options{
		Layout:            heavy.LayoutFor(o.DataDir),
		Image:             o.Image,
		StateDir:          filepath.Join(dir, "heavy"),
		Warm:              warm,
		NoRestore:         noRestore,
		NoTemplateSharing: o.NoTemplateSharing,
		FillParallel:      o.FillParallel,
		Logger:            slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	return &runtimeEngine{rt: rt, limits: limits, log: logFile}, nil
}

func (e *runtimeEngine) NewSession(ctx context.Context) (targetSession, error) {
	s, err := e.rt.NewSession(ctx, sandbox.SessionOptions{Tier: heavy.Tier, Limits: e.limits})
	if err != nil {
		return nil, err
	}
	return &runtimeSession{s: s, limits: e.limits}, nil
}

func (e *runtimeEngine) Pool() heavy.PoolStats { return e.rt.PoolStats() }
func (e *runtimeEngine) SetWarm(n int)         { e.rt.SetWarm(n) }

func (e *runtimeEngine) Close() error {
	err := e.rt.Close()
	e.log.Close()
	return err
}

type runtimeSession struct {
	s      sandbox.Session
	limits sandbox.Limits
}

func (s *runtimeSession) Run(ctx context.Context, code string) (runResult, error) {
	res, err := s.s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: s.limits})
	if err != nil {
		return runResult{}, err
	}
	r := runResult{Stdout: res.Stdout, Pool: res.Timing.Pool, Execute: res.Timing.Execute}
	if res.Error != nil {
		r.Failure = res.Error.Name + ": " + res.Error.Value
	} else if res.ExitCode != 0 {
		r.Failure = fmt.Sprintf("exit code %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return r, nil
}

func (s *runtimeSession) Close() error { return s.s.Close() }
