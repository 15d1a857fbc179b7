package heavy

import (
	"fmt"
	"time"
)

// The restore gate decides whether warm sandboxes are restored from the template now. Restores
// fail for two kinds of reason, which call for opposite answers:
//   - load: under a burst of other gVisor work a restore misses its RestoreTimeout, or runsc is
//     killed or starved. The template is fine and restores work again once the burst passes, so
//     the gate suspends restores for a backoff (the pool boots meanwhile) and then tries again;
//   - a broken template: its files are gone or changed, or runsc or the image changed under it
//     (template.broken says which). Retrying cannot help, so the template is dropped.
//
// Before maxRestoreFailures failures in a row a failed restore is only replaced by a boot: one
// restore in ~90 never answers even on a quiet machine (notes/gvisor.md).

// maxRestoreFailures is how many restores may fail in a row before restores are suspended (or
// the template dropped, if it is broken).
const maxRestoreFailures = 3

// Defaults of the backoff between attempts to restore again (Options.RestoreBackoff and
// Options.RestoreBackoffMax). 5 s lets a short burst pass without many wasted restores; the
// doubling reaches the 5 min cap after six suspensions in a row, so a machine that stays
// overloaded pays at most one failed restore (~0.3 s of CPU) every five minutes.
const (
	defaultRestoreBackoff    = 5 * time.Second
	defaultRestoreBackoffMax = 5 * time.Minute
)

// Template states, as PoolStats.TemplateState reports them.
const (
	TemplateNone      = "none"      // warm sandboxes are booted (no restore wanted, or making it failed)
	TemplateMaking    = "making"    // the checkpoint is being found or made
	TemplateRestoring = "restoring" // warm sandboxes are restored from it
	TemplateSuspended = "suspended" // restores failed under load; booted until SuspendedUntil
	TemplateDropped   = "dropped"   // the template is broken and was dropped; booted from now on
)

// restoreGate is the template's health: failures in a row, the current backoff and until when
// restores are suspended. Guarded by Runtime.mu.
type restoreGate struct {
	initial, max time.Duration // the backoff's first and largest step

	failures    int           // restores that failed in a row
	backoff     time.Duration // the next suspension's length
	until       time.Time     // no restore before this
	lastErr     string        // the last failure
	suspensions int64         // suspensions since the runtime started
}

func newRestoreGate(initial, max time.Duration) restoreGate {
	return restoreGate{initial: initial, max: max, backoff: initial}
}

// open says whether a restore may be tried at now.
func (g *restoreGate) open(now time.Time) bool { return !now.Before(g.until) }

// suspended says whether restores are suspended at now.
func (g *restoreGate) suspended(now time.Time) bool { return now.Before(g.until) }

// worked records a restore that worked: the run of failures ends and the backoff starts over.
// It says whether restores had been suspended before (so the change can be logged).
func (g *restoreGate) worked() (wasFailing bool) {
	wasFailing = g.failures >= maxRestoreFailures
	g.failures, g.backoff, g.until, g.lastErr = 0, g.initial, time.Time{}, ""
	return wasFailing
}

// failed records a failed restore at now and says whether it suspends restores. The first
// failures in a row suspend nothing; at maxRestoreFailures, and at each failure of the one
// restore tried after a suspension, restores are suspended for the current backoff, which then
// doubles up to max. Failures of restores that were already under way when the gate closed
// change neither the deadline nor the backoff.
func (g *restoreGate) failed(now time.Time, err error) (suspend bool) {
	g.failures++
	g.lastErr = err.Error()
	if g.failures < maxRestoreFailures || g.suspended(now) {
		return false
	}
	g.until = now.Add(g.backoff)
	g.backoff = min(2*g.backoff, g.max)
	g.suspensions++
	return true
}

// describe says why restores are suspended, for PoolStats.TemplateInfo.
func (g *restoreGate) describe() string {
	return fmt.Sprintf("suspended until %s after %d failed restores in a row (last: %s); warm sandboxes are booted meanwhile",
		g.until.Format("15:04:05.000"), g.failures, g.lastErr)
}
