package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// target is a daemon as the nano scenarios use it: through its HTTP API. The daemons the bench
// starts itself and one given with -url are both reached over HTTP; only how they are found
// differs.
type target interface {
	// Run runs code one-shot on the nano tier with the given timeout.
	Run(ctx context.Context, code string, timeout time.Duration) (runResult, error)
	// NewSession opens a nano session.
	NewSession(ctx context.Context) (targetSession, error)
	// Pool reports the nano tier's pool as the daemon's health shows it. ok is false when the
	// health does not say.
	Pool(ctx context.Context) (p poolState, ok bool, err error)
	// Close releases the target; for a daemon the bench started, it stops the daemon.
	Close() error
}

type targetSession interface {
	Run(ctx context.Context, code string) (runResult, error)
	Close() error
}

// runResult is what the scenarios read of a run's result.
type runResult struct {
	Stdout string
	// Pool is "warm" or "cold": whether a parked interpreter served the run.
	Pool string
	// Execute is the run's execution time as the daemon measured it.
	Execute time.Duration
	// Failure is set when the code itself failed (an exception or a non-zero exit).
	Failure string
}

// poolState is the nano runtime's health: free one-shot workers and parked interpreters.
type poolState struct {
	Free, Workers, Warm int
}

// nanoHealth matches the nano runtime's health state ("2 of 2 workers free, 4 warm interpreters").
var nanoHealth = regexp.MustCompile(`(\d+) of (\d+) workers free, (\d+) warm`)

// parsePool reads a poolState from the nano runtime's health text.
func parsePool(state string) (poolState, bool) {
	m := nanoHealth.FindStringSubmatch(state)
	if m == nil {
		return poolState{}, false
	}
	var p poolState
	p.Free, _ = strconv.Atoi(m[1])
	p.Workers, _ = strconv.Atoi(m[2])
	p.Warm, _ = strconv.Atoi(m[3])
	return p, true
}

func (p poolState) String() string {
	return fmt.Sprintf("%d of %d workers free, %d warm", p.Free, p.Workers, p.Warm)
}
