package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Moving a session. A session created with runtime auto starts on the first tier with sessions
// (nano, which starts in milliseconds), though nothing of what its later code needs is known yet.
// When a run needs another tier (the router ranks another first: an import nano lacks and an
// image has, a thread, a process or a socket; or the tier's interpreter meets one of those,
// Explainer), the session moves: a sandbox of that tier is started with the session's options,
// the session's earlier runs are replayed in it, in order and with their output discarded, and it
// takes the old sandbox's place under the same ID. The run then goes there, and its routing
// reasons say what happened.
//
// Replay is how the state travels because a sandbox's state cannot: a Wasm interpreter's memory
// means nothing to a Linux CPython. Only a contained tier's sessions move (Capabilities.Contained):
// its runs have no way out (no network, no files but their own), so replaying one repeats no
// outside effect. Replay is not exact for code that reads the clock or random numbers: such
// values differ. A replay whose run does not end as it did before (ok, or the same exception)
// aborts the move; the session then stays as it was, and the user gets a conflict that says which
// run failed.
//
// A session moves only from auto: a session created with an explicit tier answers with that
// tier's error and a hint instead (hintSession). It moves while its tier is contained, so in
// practice once. The log of runs is bounded (MaxReplayRuns, MaxReplayBytes); a session past the
// bounds cannot move.

// movable reports whether s may still move. The caller holds s.run or Manager.mu.
func (m *Manager) movable(s *session) bool {
	if !s.auto {
		return false
	}
	c, _ := m.Capabilities(s.info.Tier)
	return c.Contained
}

// needsMove asks the router where a session run's code would go as a one-shot run: a decision for
// another tier with sessions moves the session, unless it rests only on imports no tier was found
// to have (a module the session wrote itself, a typo), which moving would not fix. A router error
// (an unreadable request) leaves the run where the session is, as before sessions moved.
func (m *Manager) needsMove(r *RunRequest, from Tier) (Decision, bool) {
	q := *r
	q.Tier = TierAuto
	_, d, err := m.route(&q)
	if err != nil || d.Tier == from || d.Guess || d.SyntaxError != nil {
		return d, false
	}
	if c, _ := m.Capabilities(d.Tier); !c.Sessions {
		return d, false
	}
	// The session's tier may come later in the ranking: then it will do.
	return d, true
}

// movedBecause turns the router's reasons for another tier into the reason of a move: "the code
// imports pandas (not in nano; in image python-datascience)".
func movedBecause(to Tier, reasons []string) string {
	var parts []string
	for _, r := range reasons {
		r = strings.TrimPrefix(r, string(to)+": ")
		if strings.HasPrefix(r, "imports ") || strings.HasPrefix(r, "uses ") {
			r = "the code " + r
		}
		parts = append(parts, r)
	}
	return strings.Join(parts, "; ")
}

// moveAndRun moves session s to tier to and runs r there. why says what needs it: the router's
// reasons (movedBecause), or the run's error ("after ..."). nanoRes is that run's result, when the
// session already ran the code where it is (d is its decision): the code runs again in the new
// tier with what the first run left of its timeout, and if the move fails the error carries the
// first result. The caller holds s.run.
func (m *Manager) moveAndRun(ctx context.Context, id string, s *session, r *RunRequest, nanoRes *Result, d Decision, to Tier, why string) (*Result, error) {
	if nanoRes == nil {
		why = ": " + why
	} else {
		why = " " + why
	}
	from := s.info.Tier
	n, err := m.move(ctx, id, s, to, why)
	if err != nil {
		e := AsError(err)
		if nanoRes != nil {
			e.Result = nanoRes
			annotate(nanoRes, nil, d)
			m.keepArtifacts(s.info.Tenant, nanoRes, nil)
		}
		return nil, e
	}
	h := *r
	h.Tier = to
	if st, ok := h.Output.(*streamer); ok && nanoRes != nil {
		st.retry(nanoRes) // the code runs again: what its first run streamed is not streamed again
		st.note(fmt.Sprintf("[agentbox] session moved from %s to %s%s; the code runs again there\n", from, to, why))
	}
	reason := fmt.Sprintf("%s: session moved from %s%s; replayed %s", to, from, why, runs(n))
	if nanoRes != nil {
		reason += ", then this run again"
		if spent := nanoRes.Timing.Total; spent > 0 && spent < h.Limits.Timeout {
			h.Limits.Timeout -= spent // as a one-shot retry: what the nano run left of the budget
		}
	}
	res, err := s.impl.Run(ctx, &h)
	annotate(res, err, Decision{Tier: to, Reasons: append(d.Reasons, reason)})
	if st, ok := h.Output.(*streamer); ok {
		st.reuse(res, err)
	}
	m.keepArtifacts(s.info.Tenant, res, err)
	return res, err
}

// move replays s's runs in a new sandbox of tier to and, when every one ends as it did before,
// makes that sandbox the session's and closes the old one. It returns how many runs it replayed.
// On any failure the new sandbox is closed and s is left as it was. why completes "session moved
// from nano" in messages. The caller holds s.run.
func (m *Manager) move(ctx context.Context, id string, s *session, to Tier, why string) (int, error) {
	from := s.info.Tier
	hint := fmt.Sprintf("the session stays on %s with its state; create a session with runtime %s for code that needs %s", from, to, to)
	if s.replay.full != "" {
		return 0, Errorf(KindConflict, "session %s cannot move from %s to %s%s; %s", id, from, to, why, s.replay.full).
			WithHint("%s (a session moves by replaying its runs, at most %d of them and %d KiB of code)", hint, MaxReplayRuns, MaxReplayBytes>>10)
	}
	start := time.Now()
	opts := s.opts
	opts.Tier = to
	t, _ := m.tier(to)
	impl, err := t.rt.NewSession(ctx, opts)
	if err != nil {
		e := AsError(err)
		return 0, (&Error{Kind: e.Kind, Message: fmt.Sprintf("session %s could not move from %s to %s%s; starting a %s session: %s", id, from, to, why, to, e.Error())}).
			WithHint("%s; or try again", hint)
	}
	for i, run := range s.replay.runs {
		rr := run.req
		rr.Tier = to
		rr.ID = "run_" + newID()[3:]
		res, err := impl.Run(ctx, &rr)
		if got := outcomeOf(res); err != nil || got != run.outcome {
			_ = impl.Close()
			what := describe(res) + ", where in " + string(from) + " it " + run.outcome
			if err != nil {
				what = "failed: " + err.Error()
			}
			return 0, Errorf(KindConflict, "session %s could not move from %s to %s%s; replaying run %d of %d %s", id, from, to, why, i+1, len(s.replay.runs), what).
				WithHint("%s (a move replays the session's earlier runs, which must end in %s as they did in %s: code that reads the clock, random numbers or a module only %s has may not)", hint, to, from, from)
		}
	}
	m.mu.Lock()
	if m.sessions[id] != s {
		m.mu.Unlock()
		_ = impl.Close()
		return 0, fmt.Errorf("session %q was closed while it moved to %s: %w", id, to, ErrNotFound)
	}
	old := s.impl
	s.impl = impl
	s.info.Tier, s.info.MovedFrom = to, from
	m.mu.Unlock()
	n := len(s.replay.runs)
	s.replay = replayLog{}
	_ = old.Close()
	m.log.Info("session moved", "session", id, "from", from, "to", to, "why", strings.TrimLeft(why, ": "),
		"replayed", n, "took", time.Since(start))
	return n, nil
}

// describe says how a replayed run ended: "raised NameError: name 'x' is not defined".
func describe(res *Result) string {
	switch {
	case res == nil:
		return "gave no result"
	case res.Error != nil && res.Error.Value == "":
		return "raised " + res.Error.Name
	case res.Error != nil:
		return "raised " + res.Error.Name + ": " + res.Error.Value
	case res.ExitCode != 0:
		return fmt.Sprintf("exited with code %d", res.ExitCode)
	}
	return "completed"
}
