package sandbox

import (
	"fmt"
	"maps"
	"slices"
)

// The bounds of a session's replay log: beyond either, the session can no longer move (move.go).
// They bound what the Manager keeps per session (a nano session's runs are otherwise free to
// keep) and how long a move may take: replaying 256 runs is already seconds.
const (
	MaxReplayRuns  = 256
	MaxReplayBytes = 1 << 20 // code and input files, summed over the runs
)

// replayLog is what an auto session on nano has run, in order: the runs a move to heavy replays
// to rebuild the interpreter's state there. Only runs that completed are kept, each with its
// outcome, so that a run that raised (`x = 1; 1/0` leaves x behind) is replayed and expected to
// raise the same exception again. A run stopped by a limit is not kept: it has no outcome a replay
// could reproduce (a timeout interrupts at a different point each time), so what such a run left
// in nano's interpreter, where nano keeps it, does not move.
//
// Guarded by the session's run mutex.
type replayLog struct {
	runs  []replayRun
	bytes int
	// full says why the log stopped taking runs; once set, the session cannot move.
	full string
}

type replayRun struct {
	// req is the run as the session's sandbox got it: code, input files, environment, clocks and
	// limits.
	req RunRequest
	// outcome is what the run came to in nano (outcomeOf); a replay must come to the same.
	outcome string
}

// add keeps a completed run, or marks the log full when it would pass a bound.
func (l *replayLog) add(req *RunRequest, res *Result) {
	if l.full != "" {
		return
	}
	size := len(req.Code)
	for _, f := range req.Files {
		size += len(f.Content)
	}
	switch {
	case len(l.runs) >= MaxReplayRuns:
		l.full = fmt.Sprintf("it has run more than the %d runs a move replays", MaxReplayRuns)
	case l.bytes+size > MaxReplayBytes:
		l.full = fmt.Sprintf("its runs' code and input files pass the %d KiB a move replays", MaxReplayBytes>>10)
	}
	if l.full != "" {
		l.runs, l.bytes = nil, 0 // never replayed now: free them
		return
	}
	r := RunRequest{Code: req.Code, Limits: req.Limits, Files: slices.Clone(req.Files),
		Env: maps.Clone(req.Env), Deterministic: req.Deterministic}
	l.runs = append(l.runs, replayRun{req: r, outcome: outcomeOf(res)})
	l.bytes += size
}

// outcomeOf sums up how a run ended, as a replay must end too: "completed", "raised NameError",
// "exited with code 2".
func outcomeOf(res *Result) string {
	switch {
	case res == nil:
		return "gave no result"
	case res.Error != nil:
		return "raised " + res.Error.Name
	case res.ExitCode != 0:
		return fmt.Sprintf("exited with code %d", res.ExitCode)
	}
	return "completed"
}

// runs says "1 earlier run" or "3 earlier runs".
func runs(n int) string {
	if n == 1 {
		return "1 earlier run"
	}
	return fmt.Sprintf("%d earlier runs", n)
}
