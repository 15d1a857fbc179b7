package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
)

// The daemons of the nano scenarios: -url and -cold-url, or daemons the bench starts in this
// process, one after the other.

// warmTarget is the daemon of the warm scenarios: -url, or one the bench starts with the default
// configuration (warm pool on).
func (b *nanoBencher) warmTarget(ctx context.Context) (target, error) {
	if b.opts.URL != "" {
		return b.remote(ctx, b.opts.URL, "warm")
	}
	return b.inProcess(ctx, nano.DefaultConfig().WarmPerWorker())
}

// coldTarget is the daemon of the cold scenarios: -cold-url, or one the bench starts with the warm
// pool off. With -url but no -cold-url there is none: the bench cannot reconfigure a running
// daemon.
func (b *nanoBencher) coldTarget(ctx context.Context) (target, error) {
	switch {
	case b.opts.ColdURL != "":
		return b.remote(ctx, b.opts.ColdURL, "cold")
	case b.opts.URL != "":
		return nil, errors.New("skipped: with -url, give -cold-url: a second daemon configured with nano.warm = 0")
	}
	return b.inProcess(ctx, 0)
}

func (b *nanoBencher) remote(ctx context.Context, url, what string) (target, error) {
	t, err := newHTTPTarget(url, b.opts.APIKey)
	if err != nil {
		return nil, err
	}
	if _, _, err := t.Pool(ctx); err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", url, err)
	}
	b.note("%s scenarios ran against the daemon at %s (%s)", what, url, t.version(ctx))
	return t, nil
}

// inProcess starts a daemon in this process for the nano scenarios (startDaemon) with
// nano.warm = warm, the heavy tier off, and room for the density scenario's idle sessions.
func (b *nanoBencher) inProcess(ctx context.Context, warm int) (target, error) {
	t, cfg, logPath, err := startDaemon(ctx, b.opts.DataDir, "daemon.log", func(c *daemonConfig) {
		c.Nano.Warm = &warm
		// The figures are the nano tier's: a heavy pool restoring gVisor sandboxes beside them
		// would take the CPU they are measured on.
		c.Heavy.Enabled = heavy.Off
		// Room for the idle sessions of the density scenario, and time to open them all before
		// the first ones expire.
		c.Sessions.Max = max(c.Sessions.Max, b.opts.IdleSessions+8)
		c.Sessions.IdleTimeout = max(c.Sessions.IdleTimeout, config.Duration(time.Hour))
	}, b.progress)
	if err != nil {
		return nil, err
	}
	pool := "on"
	if warm == 0 {
		pool = "off"
	}
	b.note("the bench started its own daemon for the pool-%s scenarios: %d nano workers, nano.warm = %d, heavy tier off, sessions.max = %d, served on %s; its log is %s",
		pool, cfg.Nano.Workers, warm, cfg.Sessions.Max, cfg.Listen, logPath)
	return t, nil
}

// newPacer sets up pacing as -pace says. With "health" it first waits until the pool is at rest.
func (b *nanoBencher) newPacer(ctx context.Context, t target) (*pacer, error) {
	return newPacer(ctx, t, b.opts.Pace, b.note)
}
