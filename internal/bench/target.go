package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// target is a daemon as the HTTP scenarios use it: through its HTTP API, on one tier (nano for
// `bench nano`, heavy for the HTTP scenarios of `bench heavy`). The daemons the bench starts
// itself and one given with -url are both reached over HTTP; only how they are found differs.
type target interface {
	// Run runs code one-shot on the target's tier with the given timeout.
	Run(ctx context.Context, code string, timeout time.Duration) (runResult, error)
	// NewSession opens a session on the target's tier.
	NewSession(ctx context.Context) (targetSession, error)
	// Pool reports the tier's pool as the daemon's health shows it. ok is false when the health
	// does not say.
	Pool(ctx context.Context) (p poolState, ok bool, err error)
	// Memory reads the PSS of the daemon and all its descendant processes; errNotOurs for a
	// daemon the bench did not start.
	Memory(ctx context.Context) (memSample, error)
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

// poolState is a tier's pool as its health reports it: for nano, free one-shot workers and
// parked interpreters; for heavy, sandbox slots not in use, the cap, and warm sandboxes.
type poolState struct {
	Free, Workers, Warm int
	// SessionReady and SessionWorkers are nano's pool of session workers, where its health
	// reports one ("1 of 2 session workers ready"); zero otherwise.
	SessionReady, SessionWorkers int
	// WarmTarget is how many warm sandboxes the heavy pool aims at now ("pool target 2"), where
	// its health says; zero otherwise.
	WarmTarget int
	// State is the health's whole text, which may say more than the fields (session workers,
	// hibernated sessions): atRest waits until it stops changing.
	State string
}

// heavyHealth matches the heavy runtime's health state ("image python-datascience (abc), 2 warm
// (restored from a checkpoint), 0 of 16 in use").
var heavyHealth = regexp.MustCompile(`(\d+) warm\b.*?\b(\d+) of (\d+) in use`)

// heavyTarget matches the size the heavy pool aims at, in its health state.
var heavyTarget = regexp.MustCompile(`pool target (\d+)`)

// parseHeavyPool reads a poolState from the heavy runtime's health text: Workers is the sandbox
// cap, Free the slots not in use, so that "every worker free" means no sandbox is busy.
func parseHeavyPool(state string) (poolState, bool) {
	m, ok := submatchInts(heavyHealth, state)
	if !ok {
		return poolState{}, false
	}
	p := poolState{Warm: m[0], Workers: m[2], Free: m[2] - m[1], State: state}
	if m, ok := submatchInts(heavyTarget, state); ok {
		p.WarmTarget = m[0]
	}
	return p, true
}

// nanoHealth matches the nano runtime's health state ("2 of 2 workers free, 4 warm interpreters").
var nanoHealth = regexp.MustCompile(`(\d+) of (\d+) workers free, (\d+) warm`)

// nanoSessionHealth matches the nano runtime's pool of session workers in its health state.
var nanoSessionHealth = regexp.MustCompile(`(\d+) of (\d+) session workers ready`)

// parsePool reads a poolState from the nano runtime's health text.
func parsePool(state string) (poolState, bool) {
	m, ok := submatchInts(nanoHealth, state)
	if !ok {
		return poolState{}, false
	}
	p := poolState{Free: m[0], Workers: m[1], Warm: m[2], State: state}
	if m, ok := submatchInts(nanoSessionHealth, state); ok {
		p.SessionReady, p.SessionWorkers = m[0], m[1]
	}
	return p, true
}

// submatchInts returns the numbers re's groups matched in s, or false when it did not match.
func submatchInts(re *regexp.Regexp, s string) ([]int, bool) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return nil, false
	}
	n := make([]int, len(m)-1)
	for i, g := range m[1:] {
		n[i], _ = strconv.Atoi(g)
	}
	return n, true
}

func (p poolState) String() string {
	s := fmt.Sprintf("%d of %d workers free, %d warm", p.Free, p.Workers, p.Warm)
	if p.SessionWorkers > 0 {
		s += fmt.Sprintf(", %d of %d session workers ready", p.SessionReady, p.SessionWorkers)
	}
	return s
}
