package daemon_test

import (
	"context"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/config"
)

// TestNanoSessionBurst: 200 nano sessions created at once through the API all answer their first
// run, the first from ready workers and the rest as workers start or are freed, and each then
// answers again with its own state, some of them restored from hibernation.
func TestNanoSessionBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dozens of worker processes")
	}
	c, _ := startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled = heavy.Off }))
		c.Sessions.Max = 256
		mustConfigure(t, nano.Configure(c, func(n *nano.Config) { n.MaxSessionWorkers = 16 }))
	})
	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
			if err != nil {
				errs <- fmt.Errorf("create %d: %w", i, err)
				return
			}
			ids[i] = s.ID
			res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: fmt.Sprintf("x = %d\nprint(x)", i), Timeout: 120})
			if err != nil || res.Stdout != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("session %d, first run: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	restored := 0
	var mu sync.Mutex
	for i, id := range ids {
		if id == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.RunInSession(ctx, id, api.RunRequest{Code: "print(x * 2)", Timeout: 120})
			if err != nil || res.Stdout != fmt.Sprintf("%d\n", 2*i) {
				errs <- fmt.Errorf("session %d, second run: %+v %v", i, res, err)
				return
			}
			if res.Timings.Pool == "restored" {
				mu.Lock()
				restored++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if restored == 0 {
		t.Error("no second run was restored from hibernation; with 16 workers for 200 sessions most should be")
	}
	t.Logf("%d of %d second runs restored from hibernation", restored, n)
}
