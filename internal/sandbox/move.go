package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Moving a session. A session created with runtime auto starts on nano, which starts in
// milliseconds, though nothing of what its later code needs is known yet. When a run needs
// heavy (the router reads an import nano lacks and an image has, a thread, a process or a socket;
// or nano's interpreter meets one of those), the session moves: a heavy sandbox is started with
// the session's options, the session's earlier runs are replayed in it, in order and with their
// output discarded, and it takes the nano sandbox's place under the same ID. The run then goes
// to heavy, and its routing reasons say what happened.
//
// Replay is how the state travels because nano's state cannot: a Wasm interpreter's memory means
// nothing to a Linux CPython. It is safe to repeat nano's runs, because a nano run has no way
// out (no network, no files but its own), so replaying one repeats no outside effect. It is not
// exact for code that reads the clock or random numbers: such values differ in heavy. A replay
// whose run does not end as it did in nano (ok, or the same exception) aborts the move; the
// session then stays on nano as it was, and the user gets a conflict that says which run failed.
//
// A session moves once (heavy is the last tier) and only from auto: a session created with
// runtime nano answers with nano's error and a hint instead (hintNanoSession). The log of runs is
// bounded (MaxReplayRuns, MaxReplayBytes); a session past the bounds cannot move.

// movable reports whether s may still move. The caller holds s.run or Manager.mu.
func (m *Manager) movable(s *session) bool {
	return s.auto && s.info.Tier == TierNano
}

// needsHeavy asks the router where a session run's code would go as a one-shot run: a decision
// for heavy moves the session, unless it rests only on imports no tier was found to have (a
// module the session wrote itself, a typo), which moving would not fix. A router error (an
// unreadable request) leaves the run to nano, as before sessions moved.
func (m *Manager) needsHeavy(r *RunRequest) (Decision, bool) {
	q := *r
	q.Tier = TierAuto
	d, err := m.router.Route(&q)
	if err != nil || d.Tier != TierHeavy || d.Guess || d.SyntaxError != nil {
		return d, false
	}
	return d, true
}

// movedBecause turns the router's reasons for heavy into the reason of a move: "the code imports
// pandas (not in nano; in image python-datascience)".
func movedBecause(reasons []string) string {
	var parts []string
	for _, r := range reasons {
		r = strings.TrimPrefix(r, string(TierHeavy)+": ")
		if strings.HasPrefix(r, "imports ") || strings.HasPrefix(r, "uses ") {
			r = "the code " + r
		}
		parts = append(parts, r)
	}
	return strings.Join(parts, "; ")
}

// moveAndRun moves session s to heavy and runs r there. why says what needs heavy: the
// router's reasons (movedBecause), or the nano run's error ("after ..."). nanoRes is that nano run's
// result, when the session already ran the code in nano (d is its decision): the code runs again
// in heavy with what the nano run left of its timeout, and if the move fails the error carries
// nano's result. The caller holds s.run.
func (m *Manager) moveAndRun(ctx context.Context, id string, s *session, r *RunRequest, nanoRes *Result, d Decision, why string) (*Result, error) {
	if nanoRes == nil {
		why = ": " + why
	} else {
		why = " " + why
	}
	n, err := m.move(ctx, id, s, why)
	if err != nil {
		e := AsError(err)
		if nanoRes != nil {
			e.Result = nanoRes
			annotate(nanoRes, nil, d)
			m.keepArtifacts(nanoRes, nil)
		}
		return nil, e
	}
	h := *r
	h.Tier = TierHeavy
	reason := fmt.Sprintf("heavy: session moved from nano%s; replayed %s", why, runs(n))
	if nanoRes != nil {
		reason += ", then this run again"
		if spent := nanoRes.Timing.Total; spent > 0 && spent < h.Limits.Timeout {
			h.Limits.Timeout -= spent // as a one-shot retry: what the nano run left of the budget
		}
	}
	res, err := s.impl.Run(ctx, &h)
	annotate(res, err, Decision{Tier: TierHeavy, Reasons: append(d.Reasons, reason)})
	m.keepArtifacts(res, err)
	return res, err
}

// move replays s's runs in a new heavy sandbox and, when every one ends as it did in nano, makes
// that sandbox the session's and closes the nano one. It returns how many runs it replayed. On
// any failure the new sandbox is closed and s is left as it was. why completes "session moved
// from nano" in messages. The caller holds s.run.
func (m *Manager) move(ctx context.Context, id string, s *session, why string) (int, error) {
	hint := "the session stays on nano with its state; create a session with runtime heavy for code that needs heavy"
	if s.replay.full != "" {
		return 0, Errorf(KindConflict, "session %s cannot move from nano to heavy%s; %s", id, why, s.replay.full).
			WithHint("%s (a session moves by replaying its runs, at most %d of them and %d KiB of code)", hint, MaxReplayRuns, MaxReplayBytes>>10)
	}
	start := time.Now()
	opts := s.opts
	opts.Tier = TierHeavy
	impl, err := m.runtimes[TierHeavy].NewSession(ctx, opts)
	if err != nil {
		e := AsError(err)
		return 0, (&Error{Kind: e.Kind, Message: fmt.Sprintf("session %s could not move from nano to heavy%s; starting a heavy session: %s", id, why, e.Error())}).
			WithHint("%s; or try again", hint)
	}
	for i, run := range s.replay.runs {
		rr := run.req
		rr.Tier = TierHeavy
		rr.ID = "run_" + newID()[3:]
		res, err := impl.Run(ctx, &rr)
		if got := outcomeOf(res); err != nil || got != run.outcome {
			_ = impl.Close()
			what := describe(res) + ", where in nano it " + run.outcome
			if err != nil {
				what = "failed: " + err.Error()
			}
			return 0, Errorf(KindConflict, "session %s could not move from nano to heavy%s; replaying run %d of %d %s", id, why, i+1, len(s.replay.runs), what).
				WithHint("%s (a move replays the session's earlier runs, which must end in heavy as they did in nano: code that reads the clock, random numbers or a module only nano has may not)", hint)
		}
	}
	m.mu.Lock()
	if m.sessions[id] != s {
		m.mu.Unlock()
		_ = impl.Close()
		return 0, fmt.Errorf("session %q was closed while it moved to heavy: %w", id, ErrNotFound)
	}
	old := s.impl
	s.impl = impl
	s.info.Tier, s.info.MovedFrom = TierHeavy, TierNano
	m.mu.Unlock()
	n := len(s.replay.runs)
	s.replay = replayLog{}
	_ = old.Close()
	m.log.Info("session moved", "session", id, "from", TierNano, "to", TierHeavy, "why", strings.TrimLeft(why, ": "),
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
