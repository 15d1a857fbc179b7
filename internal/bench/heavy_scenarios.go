package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// firstCell is the first cell of a new session in the start scenarios; what it prints is
// compared with what the native run printed.
const firstCell = "import pandas as pd; print(pd.__version__)"

// waitPool waits until the pool holds warm sandboxes and nothing is starting or being destroyed.
func waitPool(ctx context.Context, e heavyEngine, warm int, limit time.Duration) (heavy.PoolStats, error) {
	deadline := time.Now().Add(limit)
	for {
		st := e.Pool()
		if st.Warm >= warm && st.Starting == 0 && st.Busy == 0 {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the heavy pool did not reach %d warm and idle within %v: %+v", warm, limit, st)
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return st, err
		}
	}
}

// nativeBaselines measures the image's python3 in a chroot: a process importing pandas and
// printing its version, and a REPL over a pipe. (The compute snippets run natively beside the
// heavy ones: see compute.)
func (b *heavyBencher) nativeBaselines(ctx context.Context) {
	if b.native == nil {
		err := errors.New("no image: " + b.res.Machine.Image)
		b.fail(hgStart, "python3 -c, native (chroot)", err, true)
		b.fail(hgCell, "native REPL over a pipe (chroot)", err, true)
		for _, s := range heavySnippets {
			b.snippet(s.Name).Errors[engineNative] = err.Error()
			b.snippet(s.Name).Errors[engineNativeREPL] = err.Error()
		}
		b.nativeDensity(ctx)
		return
	}
	p := b.native
	b.note("native baselines: %s", p.describe())
	b.progress("native: %d runs of python3 -c %q in the image's chroot", b.opts.N, firstCell)
	lat, err := sequential(ctx, b.opts.N, func(ctx context.Context) (time.Duration, error) {
		out, d, err := p.run(ctx, firstCell)
		if err == nil && strings.TrimSpace(out) == "" {
			err = errors.New("printed nothing")
		}
		b.version = out
		return d, err
	})
	b.add(hgStart, "python3 -c, native (chroot)", "`"+firstCell+"`, process start to exit", true, lat, err)

	b.progress("native: %d cells in a REPL in the image's chroot", b.opts.Cells)
	repl, err := p.startREPL(ctx)
	if err != nil {
		b.fail(hgCell, "native REPL over a pipe (chroot)", err, true)
	} else {
		lat, err := sessionRuns(ctx, b.opts.Cells, repl, "cell")
		repl.Close()
		b.add(hgCell, "native REPL over a pipe (chroot)", "python3 reading JSON lines, exec in one namespace, a marker line after each cell", true, lat, err)
	}
	b.nativeDensity(ctx)
}

// rowHeavyDensityNative is the density baseline of the heavy bench.
const rowHeavyDensityNative = "python3 REPL processes with the preload imported, native (chroot)"

// nativeDensity is the baseline of the idle heavy sessions' memory: opts.IdleSessions REPLs of
// the image's python3 in its chroot, each having imported what warm sandboxes preload (numpy and
// pandas) and run the density cell, idle; their PSS is read over the bench and its children,
// before any sandbox or daemon is started.
func (b *heavyBencher) nativeDensity(ctx context.Context) {
	if b.opts.NoDensity || b.opts.NoHTTP {
		return
	}
	if b.native == nil {
		b.res.Density = append(b.res.Density, Density{Key: keyNative, Name: rowHeavyDensityNative, Asked: b.opts.IdleSessions, Error: "no image: " + b.res.Machine.Image})
		return
	}
	imports := "import " + strings.Join(heavy.DefaultPreload, ", ")
	d := measureIdle(ctx, idleSpec{
		Name: rowHeavyDensityNative, Key: keyNative, K: b.opts.IdleSessions, Clients: 1,
		Detail: fmt.Sprintf("one python3 of the image per session, in its chroot, reading cells on stdin (a REPL over a pipe), having run `%s` as a warm sandbox has; PSS of the bench and the processes it started", imports),
		Open: func(ctx context.Context) (targetSession, error) {
			r, err := b.native.startREPL(context.WithoutCancel(ctx))
			if err != nil {
				return nil, err
			}
			if _, err := r.Run(ctx, imports); err != nil {
				r.Close()
				return nil, err
			}
			return r, nil
		},
		Memory: selfMemory, Progress: b.progress, SteadyFor: b.steadyFor,
	})
	b.res.Density = append(b.res.Density, d)
}

// restoreScenarios run on a runtime whose pool restores from a checkpoint.
func (b *heavyBencher) restoreScenarios(ctx context.Context, e heavyEngine) {
	warm := e.Pool().Size
	b.progress("pool hit: %d sessions, each started when the pool is full and idle", b.opts.N)
	b.starts(ctx, e, b.opts.N, warm, rowHit, rowFirstH, "paced: each session starts when the pool is full and idle; closed after its first cell")

	b.progress("warm session: %d cells", b.opts.Cells)
	if s, err := e.NewSession(ctx); err != nil {
		b.fail(hgCell, rowCell, err)
	} else {
		lat, err := sessionRuns(ctx, b.opts.Cells, s, "cell")
		b.add(hgCell, rowCell, "`"+sessionCode+"`, x counts up", false, lat, err)
		s.Close()
	}

	b.compute(ctx, e)

	e.SetWarm(0)
	b.progress("pool miss served by a restore: %d sessions with the pool off", b.opts.N)
	b.starts(ctx, e, b.opts.N, 0, rowMissR, rowFirstR, "pool resized to 0: each session is restored from the checkpoint as it is asked for")

	b.refill(ctx, e, rowFillR, b.opts.RefillReps)
}

// bootScenarios run on a runtime that boots its sandboxes (NoRestore), pool off at first.
func (b *heavyBencher) bootScenarios(ctx context.Context, e heavyEngine) {
	b.progress("pool miss served by a boot: %d sessions", b.opts.NBoot)
	b.starts(ctx, e, b.opts.NBoot, 0, rowMissB, rowFirstB, "pool off, no checkpoint: each session boots a sandbox, which then imports pandas in its first cell")
	b.refill(ctx, e, rowFillB, min(b.opts.RefillReps, 3))
}

// starts measures n sessions started when the pool holds warm sandboxes and is idle: the time to
// create each (createRow) and from create to the result of its first cell (firstRow).
func (b *heavyBencher) starts(ctx context.Context, e heavyEngine, n, warm int, createRow, firstRow, detail string) {
	var creates []time.Duration
	one := func(ctx context.Context) (time.Duration, error) {
		if _, err := waitPool(ctx, e, warm, 2*time.Minute); err != nil {
			return 0, err
		}
		start := time.Now()
		s, err := e.NewSession(ctx)
		if err != nil {
			return 0, err
		}
		created := time.Since(start)
		res, err := s.Run(ctx, firstCell)
		d := time.Since(start)
		s.Close()
		if err != nil {
			return 0, err
		}
		if res.Failure != "" || strings.TrimSpace(res.Stdout) == "" || (b.version != "" && res.Stdout != b.version) {
			return 0, fmt.Errorf("the first cell printed %q (%s), natively %q", res.Stdout, res.Failure, b.version)
		}
		creates = append(creates, created)
		return d, nil
	}
	lat, err := sequential(ctx, n, one)
	if len(creates) > warmup {
		creates = creates[warmup:]
	}
	b.add(hgStart, createRow, detail, false, creates, err)
	b.add(hgStart, firstRow, "`"+firstCell+"` in a new session, from the create call to its result", false, lat, err)
}

// refill empties the pool, then times how long it takes to make opts.Refill warm sandboxes, reps
// times.
func (b *heavyBencher) refill(ctx context.Context, e heavyEngine, row string, reps int) {
	n := b.opts.Refill
	b.progress("%s: %d sandboxes from an empty pool, %d times", row, n, reps)
	var times []time.Duration
	var err error
	for i := 0; i < reps && err == nil; i++ {
		e.SetWarm(0)
		if _, err = waitPool(ctx, e, 0, 2*time.Minute); err != nil {
			break
		}
		start := time.Now()
		e.SetWarm(n)
		var st heavy.PoolStats
		st, err = waitPool(ctx, e, n, 5*time.Minute)
		if err == nil && st.RestoreFailures > 0 && row == rowFillR {
			b.note("%s: %d restores failed and were replaced by boots", row, st.RestoreFailures)
		}
		times = append(times, time.Since(start))
	}
	e.SetWarm(0)
	row2 := Row{Group: hgRefill, Name: row, Base: row == rowFillB}
	if err != nil {
		b.addFailed(row2, err)
		return
	}
	s := Summarize(times, 0)
	s.PerSecond = float64(n) / (s.Median / 1000)
	row2.Stats = &s
	row2.Detail = fmt.Sprintf("time from resizing an empty, idle pool to %d until %d are warm; sandboxes/s = %d ÷ the median", n, n, n)
	b.progress("%s: median %.0f ms for %d = %.1f sandboxes/s", row, s.Median, n, s.PerSecond)
	b.res.Rows = append(b.res.Rows, row2)
}
