package heavy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The gate suspends restores at the third failure in a row, for a backoff that doubles up to its
// cap each time the restore tried after a suspension fails too, and opens for good on a success.
func TestRestoreGate(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	fail := errors.New("the restored sandbox did not answer: timeout")
	type step struct {
		at      time.Duration // since t0
		ok      bool          // the restore worked
		suspend bool          // want: this failure suspends restores
		until   time.Duration // want: suspended until t0+until (0: open)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"two failures suspend nothing", []step{{at: 0}, {at: 1 * time.Second}}},
		{"the third suspends for the first backoff", []step{{at: 0}, {at: 0}, {at: 0, suspend: true, until: 5 * time.Second}}},
		{"failures already under way change nothing", []step{
			{at: 0}, {at: 0}, {at: 0, suspend: true, until: 5 * time.Second}, {at: time.Second, until: 5 * time.Second}}},
		{"each failed retry doubles the backoff up to the cap", []step{
			{at: 0}, {at: 0}, {at: 0, suspend: true, until: 5 * time.Second},
			{at: 5 * time.Second, suspend: true, until: 15 * time.Second},
			{at: 15 * time.Second, suspend: true, until: 35 * time.Second},
			{at: 35 * time.Second, suspend: true, until: 55 * time.Second}, // capped at 20 s
			{at: 55 * time.Second, suspend: true, until: 75 * time.Second}}},
		{"a success resets the count and the backoff", []step{
			{at: 0}, {at: 0}, {at: 0, suspend: true, until: 5 * time.Second},
			{at: 5 * time.Second, suspend: true, until: 15 * time.Second},
			{at: 15 * time.Second, ok: true},
			{at: 16 * time.Second}, {at: 16 * time.Second}, {at: 16 * time.Second, suspend: true, until: 21 * time.Second}}},
		{"a success between failures breaks the row", []step{{at: 0}, {at: 0}, {at: 0, ok: true}, {at: 0}, {at: 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRestoreGate(5*time.Second, 20*time.Second)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if !g.open(now) {
					// A caller never starts a restore while the gate is closed, but a restore started
					// before may still report.
					if s.ok {
						t.Fatalf("step %d: a restore worked while the gate was closed", i)
					}
				}
				if s.ok {
					g.worked()
				} else if got := g.failed(now, fail); got != s.suspend {
					t.Fatalf("step %d: failed() = %v, want %v (gate %+v)", i, got, s.suspend, g)
				}
				var until time.Duration
				if !g.until.IsZero() {
					until = g.until.Sub(t0)
				}
				if until != s.until {
					t.Fatalf("step %d: suspended until +%v, want +%v", i, until, s.until)
				}
			}
		})
	}
}

// Restores that fail as they do under load (a restored sandbox that does not answer in time)
// suspend restoring: the pool boots its sandboxes meanwhile, says so in PoolStats, and after the
// backoff, once restores work again, it restores them again.
func TestRestoresSuspendedUnderLoadComeBack(t *testing.T) {
	const backoff = 5 * time.Second
	rt := newTestRuntime(t, Options{Warm: 3, RestoreBackoff: backoff, RestoreBackoffMax: 2 * backoff})
	l := limits(t, 30*time.Second)
	if st := waitWarm(t, rt, 3); !st.Template || st.TemplateState != TemplateRestoring {
		t.Fatalf("no template to restore from: %+v", st)
	}
	rt.mu.Lock()
	rt.restoreFault = func() error { return errors.New("simulated load: no answer within the restore timeout") }
	rt.mu.Unlock()

	// Three claims empty the pool; its three restores fail and are replaced by boots.
	for i := 0; i < 3; i++ {
		newSession(t, rt, l).Close()
	}
	var st PoolStats
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if st = rt.PoolStats(); st.RestoreFailures >= maxRestoreFailures || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("under load: %s: %s", st.TemplateState, st.TemplateInfo)
	if st.TemplateState != TemplateSuspended || st.Template || st.RestoreFailuresInRow < maxRestoreFailures ||
		st.Suspensions != 1 || !strings.Contains(st.TemplateInfo, "simulated load") || !strings.Contains(st.LastRestoreError, "simulated load") {
		t.Fatalf("after restores failed under load: %+v", st)
	}
	if left := time.Until(st.SuspendedUntil); left <= 0 || left > backoff {
		t.Errorf("suspended for %v more, want within the %v backoff", left, backoff)
	}
	if st.RestoreBackoff != 2*backoff {
		t.Errorf("next backoff %v, want %v", st.RestoreBackoff, 2*backoff)
	}
	if h, _ := rt.Health(t.Context()); !strings.Contains(h, "suspended") {
		t.Errorf("health does not say restores are suspended: %s", h)
	}
	if st = waitWarm(t, rt, 3); st.FillBooted < 3 {
		t.Errorf("the failed restores were not replaced by boots: %+v", st)
	}
	s := newSession(t, rt, l)
	if s.(*session).b.restored {
		t.Error("a sandbox restored while restores were suspended")
	}
	if got := mustRun(t, s, l, preloadProbe); got != preloaded {
		t.Errorf("a booted warm sandbox: %q, want %q", got, preloaded)
	}
	s.Close()

	// The load is gone: after the backoff the pool restores again, and its sandboxes are
	// restored ones.
	rt.mu.Lock()
	rt.restoreFault = nil
	rt.mu.Unlock()
	time.Sleep(time.Until(st.SuspendedUntil))
	booted := rt.PoolStats().FillBooted
	for i := 0; i < 6; i++ { // the booted ones go first; their replacements are restored
		s := newSession(t, rt, l)
		s.Close()
		waitWarm(t, rt, 3)
	}
	st = rt.PoolStats()
	t.Logf("after the load: %s: %s", st.TemplateState, st.TemplateInfo)
	if st.TemplateState != TemplateRestoring || !st.Template || st.RestoreFailuresInRow != 0 || st.FillBooted > booted+1 {
		t.Fatalf("restores did not come back: %+v", st)
	}
	if st.RestoreBackoff != backoff {
		t.Errorf("the backoff is %v after a restore worked, want it reset to %v", st.RestoreBackoff, backoff)
	}
	for i := 0; i < 3; i++ {
		s := newSession(t, rt, l)
		if !s.(*session).b.restored {
			t.Errorf("claim %d after the load: a booted sandbox", i)
		}
		if got := mustRun(t, s, l, preloadProbe); got != preloaded {
			t.Errorf("a restored sandbox: %q, want %q", got, preloaded)
		}
		s.Close()
	}
}
