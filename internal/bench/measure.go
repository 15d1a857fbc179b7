package bench

import (
	"context"
	"sync"
	"time"
)

// A call is one timed run of a scenario. It returns the latency to record: usually the wall time
// around the run, measured by the caller, but a driver may report a time it measured itself.
type call func(ctx context.Context) (time.Duration, error)

// warmup is how many untimed calls precede a scenario's timed ones: they load the page cache,
// connect the HTTP client and let lazy initialisation happen before the clock runs.
const warmup = 3

// sequential makes warmup untimed calls, then n timed ones, one after the other.
func sequential(ctx context.Context, n int, c call) ([]time.Duration, error) {
	for i := 0; i < warmup; i++ {
		if _, err := c(ctx); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := c(ctx)
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// concurrent makes n timed calls from clients goroutines, each starting its next call as soon as
// its last one returned, and returns every call's latency and the wall time of the whole batch.
// The first error stops every client.
func concurrent(ctx context.Context, clients, n int, c call) ([]time.Duration, time.Duration, error) {
	for i := 0; i < warmup; i++ {
		if _, err := c(ctx); err != nil {
			return nil, 0, err
		}
	}
	return burst(ctx, clients, n, c)
}

// burst is concurrent without the warm-up calls: for a caller that warms up and then waits for
// the daemon to come to rest before the clients start.
func burst(ctx context.Context, clients, n int, c call) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu  sync.Mutex
		lat = make([]time.Duration, 0, n)
	)
	start := time.Now()
	err := fanOut(clients, n, func(int) error {
		d, err := c(ctx)
		if err != nil {
			cancel() // the calls under way fail fast: the scenario has failed
			return err
		}
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return nil, 0, err
	}
	return lat, wall, nil
}

// fanOut calls f(i) for every i from 0 to n-1 from clients goroutines (at least one), each taking
// the next i as soon as its last call returned, as clients back to back do. The first error stops
// the taking and is returned once the calls under way have returned.
func fanOut(clients, n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= n || first != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range max(clients, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, ok := take(); ok; i, ok = take() {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
