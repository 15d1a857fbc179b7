package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// groupTicker is the table of how promptly the daemon's own goroutines run while guests spin:
// the figure nano's TestSpinningGuestsDoNotStarveDaemon used to assert (a 10 ms ticker at most
// 50 ms late), which is the machine's scheduling latency and moves with any other load, so it is
// measured here beside the same ticker with no guests in the same run. The test holds what it
// stands for without timing: each spinning worker's threads and autogroup are below the
// daemon's (read from /proc), and a starvation bound of 500 ms.
const groupTicker = "ticker"

// Row names of the ticker table.
const (
	rowTickerAlone = "daemon's 10 ms ticker, no guests"
	rowTickerSpin  = "daemon's 10 ms ticker, guests spinning"
)

// tickerSpinners is how many guests spin at once (the test's eight: four per core of a 2-core
// machine); tickerSpin is how long each spins (its run's timeout) and tickerWindow how long the
// ticker is read, inside the spin.
const (
	tickerSpinners = 8
	tickerSpin     = 2 * time.Second
	tickerWindow   = 1500 * time.Millisecond
	tickerPeriod   = 10 * time.Millisecond
)

// nanoTicker measures how late a 10 ms ticker in the daemon's process fires, each tick's
// lateness a sample: first with no run in flight, then while tickerSpinners one-shot runs of
// `while True: pass` spin to their timeout. The daemon is one of its own with tickerSpinners
// workers (as the test's runtime has), so that they all spin at once on however many cores the
// machine has; only a daemon this process runs shares the ticker's scheduler, so with -url the
// table says it was skipped.
func (b *nanoBencher) nanoTicker(ctx context.Context) {
	fail := func(err error) {
		b.fail(groupTicker, "", rowTickerAlone, err)
		b.fail(groupTicker, "", rowTickerSpin, err)
	}
	if b.opts.URL != "" {
		fail(fmt.Errorf("skipped: the ticker must run in the daemon's process, and the daemon at %s is not this one", b.opts.URL))
		return
	}
	t, cfg, _, err := startDaemon(ctx, b.opts.DataDir, "daemon-ticker.log", func(c *daemonConfig) {
		c.Nano.Workers = tickerSpinners
		c.Heavy.Enabled = heavy.Off
	}, b.progress)
	if err != nil {
		fail(err)
		return
	}
	defer t.Close()
	// Every worker up with its interpreters parked, so that no start competes with the ticker.
	if err := atRest(t)(ctx, 0); err != nil {
		fail(err)
		return
	}
	b.progress("daemon ticker: %v alone, then beside %d spinning guests (%d nano workers)", tickerWindow, tickerSpinners, cfg.Nano.Workers)
	alone := tickLateness(ctx, tickerWindow)
	b.addTicker(rowTickerAlone, "no run in flight", alone, nil)

	var wg sync.WaitGroup
	errs := make(chan error, tickerSpinners)
	for range tickerSpinners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A timeout is the run's expected end; anything else spoils the figure.
			var ce *client.Error
			if _, err := t.Run(ctx, "while True: pass", tickerSpin); err != nil && !(errors.As(err, &ce) && ce.Code == api.CodeTimeout) {
				errs <- err
			}
		}()
	}
	spin := tickLateness(ctx, tickerWindow)
	wg.Wait()
	close(errs)
	b.addTicker(rowTickerSpin, fmt.Sprintf("%d one-shot runs of `while True: pass` at once to their %v timeout, on a daemon of %d nano workers (its own); read during the first %v",
		tickerSpinners, tickerSpin, cfg.Nano.Workers, tickerWindow), spin, <-errs)
}

// addTicker adds a row of tick lateness, the alone row as the base its ratio divides by.
func (b *nanoBencher) addTicker(name, detail string, lateness []time.Duration, err error) {
	row := Row{Group: groupTicker, Name: name, Detail: detail, Base: name == rowTickerAlone}
	if err != nil {
		b.addFailed(row, err)
		return
	}
	s := Summarize(lateness, 0)
	s.PerSecond = 0
	row.Stats = &s
	worst := slices.Max(append([]time.Duration{0}, lateness...))
	row.Detail += fmt.Sprintf("; worst %.1f ms", float64(worst)/float64(time.Millisecond))
	b.progress("%s: lateness median %.2f ms, p99 %.2f ms, worst %v", name, s.Median, s.P99, worst)
	b.res.Rows = append(b.res.Rows, row)
}

// tickLateness reads a tickerPeriod ticker for window and returns how late each tick came: its
// interval since the one before, less the period (never below zero).
func tickLateness(ctx context.Context, window time.Duration) []time.Duration {
	tick := time.NewTicker(tickerPeriod)
	defer tick.Stop()
	var late []time.Duration
	last := time.Now()
	for end := last.Add(window); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return late
		case <-tick.C:
		}
		now := time.Now()
		late = append(late, max(0, now.Sub(last)-tickerPeriod))
		last = now
	}
	return late
}
