package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// The HTTP scenarios of `bench heavy` measure the heavy tier as a client of the API sees it, on
// a daemon the bench starts in this process with the heavy tier in its default configuration
// (warm pool and all): what the runtime scenarios measure in process, plus the server, the
// manager and the client.

// hgHTTP is the group of the heavy rows measured through the HTTP API.
const hgHTTP = "http"

// Row names of the heavy HTTP scenarios.
const (
	rowHTTPOneShot  = "heavy one-shot `print`, HTTP, paced"
	rowHeavyDensity = "idle heavy sessions"
)

// rowBurst names the concurrent session-start row after its number of creators.
func rowBurst(creators int) string {
	return fmt.Sprintf("session create → first result, %d concurrent creators", creators)
}

// startHeavyDaemon starts a daemon in this process (startDaemon) whose heavy tier is required
// and uses the bench's own state directory (DATA_DIR/bench/heavy, like the runtime scenarios,
// which are closed by then), with room for the density and burst scenarios' sandboxes. Its nano
// tier, which no scenario here uses, is one worker with no warm pool, so that it takes no CPU.
func startHeavyDaemon(ctx context.Context, o HeavyOptions, progress func(string, ...any)) (*httpTarget, daemonConfig, string, error) {
	t, cfg, logPath, err := startDaemon(ctx, o.DataDir, "heavy-daemon.log", func(c *daemonConfig) {
		c.Heavy.Enabled = heavy.On
		c.Heavy.Image = o.Image
		c.Heavy.StateDir = filepath.Join(o.DataDir, "bench", "heavy")
		room := o.IdleSessions + o.Creators + c.Heavy.WarmSandboxes() + 2
		c.Heavy.MaxSandboxes = max(c.Heavy.MaxSandboxes, room)
		c.Sessions.Max = max(c.Sessions.Max, room)
		c.Sessions.IdleTimeout = max(c.Sessions.IdleTimeout, config.Duration(time.Hour))
		noWarm := 0
		c.Nano.Workers, c.Nano.Warm = 1, &noWarm
	}, progress)
	if err != nil {
		return nil, cfg, "", err
	}
	t.tier = api.RuntimeHeavy
	return t, cfg, logPath, nil
}

// httpScenarios measures, on one daemon: a one-shot print paced so that each run meets a full
// pool; the memory of opts.IdleSessions idle sessions; and session create → first result from
// opts.Creators clients at once, started when the pool is full and idle.
func (b *heavyBencher) httpScenarios(ctx context.Context) {
	burstRow := rowBurst(b.opts.Creators)
	b.progress("starting a daemon in this process for the HTTP scenarios")
	t, err := b.serve(ctx)
	if err != nil {
		b.fail(hgHTTP, rowHTTPOneShot, err)
		b.fail(hgHTTP, burstRow, err)
		if !b.opts.NoDensity {
			b.res.Density = append(b.res.Density, Density{Name: rowHeavyDensity, Asked: b.opts.IdleSessions, Error: err.Error()})
		}
		return
	}
	defer func() {
		if err := t.Close(); err != nil {
			b.progress("closing the HTTP daemon: %v", err)
		}
	}()

	if p, err := newPacer(ctx, t, "health", b.note); err != nil {
		b.fail(hgHTTP, rowHTTPOneShot, err)
	} else {
		b.progress("%s: %d runs (%s)", rowHTTPOneShot, b.opts.N, p.how())
		var sv served
		lat, err := sequential(ctx, b.opts.N, p.paced(oneShot(t, &sv)))
		b.add(hgHTTP, rowHTTPOneShot, "POST /v1/run (runtime heavy) of `print(\"hi\")` from the client; "+p.summary(), false, lat, err)
	}

	// Before the burst, which grows the pool (it adapts to misses, and gives a sandbox back only
	// after a minute without one): the density readings must find the pool at the same size.
	if !b.opts.NoDensity {
		b.res.Density = append(b.res.Density, b.heavyDensity(ctx, t))
	}

	b.progress("%s: %d sessions", burstRow, b.opts.N)
	start := sessionFirstResult(t)
	lat, err := func() ([]time.Duration, error) {
		if _, err := sequential(ctx, 0, start); err != nil { // the warm-up sessions only
			return nil, err
		}
		if err := atRest(t)(ctx, 0); err != nil {
			return nil, err
		}
		lat, _, err := burst(ctx, b.opts.Creators, b.opts.N, start)
		return lat, err
	}()
	b.add(hgHTTP, burstRow, fmt.Sprintf("%d clients back to back from a full, idle pool, each creating a session (POST /v1/sessions, runtime heavy), running `print(\"hi\")` in it and closing it; timed from the create call to the result", b.opts.Creators),
		false, lat, err)
}

// heavyDensity opens opts.IdleSessions idle heavy sessions one at a time, each when the pool is
// full again, so that no claim misses and the pool does not grow: the readings before and after
// then hold the same warm sandboxes, and the difference is the sessions'.
func (b *heavyBencher) heavyDensity(ctx context.Context, t target) Density {
	sp := idleSpec{
		Name: rowHeavyDensity, K: b.opts.IdleSessions, Clients: 1,
		Detail: "heavy sessions (POST /v1/sessions, runtime heavy), opened one at a time, each when the pool is full again; PSS of the daemon (this process) and its runsc processes, each reading taken with the pool full",
		Memory: t.Memory, Settle: atRest(t), State: healthState(t), Progress: b.progress, SteadyFor: b.steadyFor,
	}
	p, err := newPacer(ctx, t, "health", b.note)
	if err != nil {
		return Density{Name: sp.Name, Asked: sp.K, Error: err.Error()}
	}
	sp.Open = func(ctx context.Context) (targetSession, error) {
		if err := p.wait(ctx); err != nil {
			return nil, err
		}
		s, err := t.NewSession(ctx)
		if err == nil {
			p.held++
		}
		return s, err
	}
	return measureIdle(ctx, sp)
}
