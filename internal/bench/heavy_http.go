package bench

import (
	"context"
	"errors"
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
	rowHTTPOneShot     = "heavy one-shot `print`, HTTP, paced"
	rowHeavyDensity    = "idle heavy sessions"
	rowHeavyHibernated = "idle heavy sessions, hibernated"
)

// rowBurst names the concurrent session-start row after its number of creators: bursts of that
// many creates at once, each burst from a pool at rest. rowBackToBack names the row of the same
// creators each creating sessions back to back, a load no pool within a memory budget absorbs
// (it measures how misses are served: restores at a few per second on two cores).
func rowBurst(creators int) string {
	return fmt.Sprintf("session create → first result, %d concurrent creators", creators)
}

func rowBackToBack(creators int) string {
	return fmt.Sprintf("session create → first result, %d creators back to back", creators)
}

// startHeavyDaemon starts a daemon in this process (startDaemon) whose heavy tier is required
// and uses the bench's own state directory (DATA_DIR/bench/heavy, like the runtime scenarios,
// which are closed by then), with room for the density and burst scenarios' sandboxes. Its nano
// tier, which no scenario here uses, is one worker with no warm pool, so that it takes no CPU.
func startHeavyDaemon(ctx context.Context, o HeavyOptions, progress func(string, ...any)) (*httpTarget, daemonConfig, string, error) {
	t, cfg, logPath, err := startDaemon(ctx, o.DataDir, "heavy-daemon.log", func(c *daemonConfig) {
		c.Heavy.Enabled = heavy.On
		c.Heavy.Image = o.Image
		share := !o.NoTemplateSharing
		c.Heavy.ShareTemplatePages = &share
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
// pool; the memory of opts.IdleSessions idle sessions; session create → first result in bursts
// of opts.Creators clients at once, each burst started when the pool is full and idle; and the
// same clients creating sessions back to back.
func (b *heavyBencher) httpScenarios(ctx context.Context) {
	burstRow, b2bRow := rowBurst(b.opts.Creators), rowBackToBack(b.opts.Creators)
	b.progress("starting a daemon in this process for the HTTP scenarios")
	t, err := b.serve(ctx)
	if err != nil {
		b.fail(hgHTTP, rowHTTPOneShot, err)
		b.fail(hgHTTP, burstRow, err)
		b.fail(hgHTTP, b2bRow, err)
		if !b.opts.NoDensity {
			b.res.Density = append(b.res.Density, Density{Name: rowHeavyDensity, Asked: b.opts.IdleSessions, Error: err.Error()},
				Density{Name: rowHeavyHibernated, Asked: b.opts.IdleSessions, Error: err.Error()})
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
		b.res.Density = append(b.res.Density, b.heavyDensity(ctx, t, b.hibernateAfter)...)
	}

	start := sessionFirstResult(t)
	b.progress("%s: %d sessions in bursts of %d", burstRow, b.opts.N, b.opts.Creators)
	lat, err := b.bursts(ctx, t, start)
	b.add(hgHTTP, burstRow, fmt.Sprintf("bursts of %d clients at once, each creating a session (POST /v1/sessions, runtime heavy), running `print(\"hi\")` in it and closing it, each burst when the pool is full and idle again, after one untimed burst (the pool grows by one sandbox per claim that finds it empty); timed from the create call to the result", b.opts.Creators),
		false, lat, err)

	b.progress("%s: %d sessions", b2bRow, b.opts.N)
	lat, err = func() ([]time.Duration, error) {
		if err := atRest(t)(ctx, 0); err != nil {
			return nil, err
		}
		lat, _, err := burst(ctx, b.opts.Creators, b.opts.N, start)
		return lat, err
	}()
	b.add(hgHTTP, b2bRow, fmt.Sprintf("%d clients back to back from a full, idle pool, each creating a session (POST /v1/sessions, runtime heavy), running `print(\"hi\")` in it and closing it; timed from the create call to the result; sustained, this asks more sessions per second than restores make (a few per second on two cores), so most are misses", b.opts.Creators),
		false, lat, err)
}

// bursts measures opts.N session starts in bursts of opts.Creators at once (the last one
// smaller if N is not a multiple), each burst started when the pool is full and idle. One
// untimed burst goes first: a pool meeting a burst larger than itself misses, and grows by one
// sandbox per miss (heavy/sizing.go), so the timed bursts show a pool that has adapted to the
// demand. The pool's size is noted.
func (b *heavyBencher) bursts(ctx context.Context, t target, start call) ([]time.Duration, error) {
	if _, _, err := burst(ctx, b.opts.Creators, b.opts.Creators, start); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for left := b.opts.N; left > 0; {
		if err := atRest(t)(ctx, 0); err != nil {
			return nil, err
		}
		n := min(left, b.opts.Creators)
		l, _, err := burst(ctx, n, n, start)
		if err != nil {
			return nil, err
		}
		lat = append(lat, l...)
		left -= n
	}
	if p, ok, err := t.Pool(ctx); err == nil && ok {
		b.note("%s: after the bursts the pool kept %d warm sandboxes (%s)", rowBurst(b.opts.Creators), p.Warm, p.State)
	}
	return lat, nil
}

// heavyDensity opens opts.IdleSessions idle heavy sessions one at a time, each when the pool is
// full again, so that no claim misses and the pool does not grow: the readings before and after
// then hold the same warm sandboxes, and the difference is the sessions'. That is the live row,
// read well before heavy.session_hibernate_after; then the same sessions are left until each has
// hibernated (paused by the daemon into its snapshot store, its sandbox freed) and read again:
// the hibernated row. Each row's sessions then answer their next run (the hibernated ones
// restored for it).
func (b *heavyBencher) heavyDensity(ctx context.Context, t target, hibernateAfter time.Duration) []Density {
	// Sandboxes in use, from the daemon's health: one per live session (warm ones do not count);
	// a hibernated session holds none.
	inUse := func(ctx context.Context) (int, error) {
		p, ok, err := t.Pool(ctx)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, errors.New("the daemon's health says nothing of its sandboxes")
		}
		return p.Workers - p.Free, nil
	}
	sp := idleSpec{
		Name: rowHeavyDensity, K: b.opts.IdleSessions, Clients: 1,
		Detail: "heavy sessions (POST /v1/sessions, runtime heavy), opened one at a time, each when the pool is full again, read while live (before heavy.session_hibernate_after); PSS of the daemon (this process) and its runsc processes (each address space once: systrap's stub processes share theirs), each reading taken with the pool full",
		Memory: t.Memory, Settle: atRest(t), Progress: b.progress, SteadyFor: b.steadyFor,
		State: healthState(t),
	}
	if hibernateAfter > 0 {
		sp.Check = func(ctx context.Context) error {
			if n, err := inUse(ctx); err != nil || n < sp.K {
				return fmt.Errorf("only %d sandboxes in use when the live reading was taken: sessions had hibernated (%v)", n, err)
			}
			return nil
		}
		sp.Then = &idleThen{
			Name: rowHeavyHibernated,
			Detail: fmt.Sprintf("the same sessions once each has hibernated after heavy.session_hibernate_after (%v) unused: paused into the daemon's snapshot store (on disk), its sandbox freed; "+
				"PSS of the daemon and its runsc processes against the same reading before; then each answers its next run, restored for it", hibernateAfter),
			Wait: func(ctx context.Context, open []targetSession) error {
				limit := hibernateAfter + 2*time.Minute
				deadline := time.Now().Add(limit)
				for {
					n, err := inUse(ctx)
					if err != nil {
						return err
					}
					if n == 0 {
						return nil
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("%d of %d sessions still hold a sandbox %v after their last run (heavy.session_hibernate_after %v)", n, len(open), limit, hibernateAfter)
					}
					if err := sleepCtx(ctx, time.Second); err != nil {
						return err
					}
				}
			},
		}
	}
	p, err := newPacer(ctx, t, "health", b.note)
	if err != nil {
		rows := []Density{{Name: sp.Name, Asked: sp.K, Error: err.Error()}}
		if sp.Then != nil {
			rows = append(rows, Density{Name: sp.Then.Name, Asked: sp.K, Error: err.Error()})
		}
		return rows
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
	return measureIdleRows(ctx, sp)
}
