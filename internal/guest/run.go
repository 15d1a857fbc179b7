//go:build linux

package guest

import (
	"encoding/json"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// defaultGrace is how long an interrupted cell may take to end before Python is restarted.
const defaultGrace = time.Second

// activeRun is the run in progress. Its counters are guarded by agent.mu.
type activeRun struct {
	id  uint64
	req *proto.RunRequest

	sent      [2]int64 // bytes of stdout, stderr sent
	truncated [2]bool

	intr     chan time.Duration // interrupt requests, with their grace
	intrOnce sync.Once
}

func newActiveRun(id uint64, req *proto.RunRequest) *activeRun {
	return &activeRun{id: id, req: req, intr: make(chan time.Duration, 1)}
}

func (r *activeRun) interrupt(grace time.Duration) {
	select {
	case r.intr <- grace:
	default:
	}
}

// output forwards a chunk of the current run's output, up to its cap. Output with no run in
// progress (a background thread printing between runs) is dropped.
func (a *agent) output(stream string, b []byte) {
	a.mu.Lock()
	r := a.run
	if r == nil {
		a.mu.Unlock()
		return
	}
	i, limit := 0, r.req.StdoutBytes
	if stream == proto.Stderr {
		i, limit = 1, r.req.StderrBytes
	}
	if limit > 0 && r.sent[i]+int64(len(b)) > limit {
		b = b[:max(0, limit-r.sent[i])]
		r.truncated[i] = true
	}
	r.sent[i] += int64(len(b))
	a.mu.Unlock()
	if len(b) > 0 {
		_ = a.send(&proto.Frame{Op: proto.OpOutput, ID: r.id, Stream: stream, Data: b})
	}
}

// currentPython returns a live Python process, restarting it if it died between runs.
func (a *agent) currentPython() (*python, bool, error) {
	a.mu.Lock()
	py := a.py
	a.mu.Unlock()
	if py != nil && py.alive() {
		return py, false, nil
	}
	np, err := a.restartPython(py)
	return np, true, err
}

func (a *agent) restartPython(old *python) (*python, error) {
	if old != nil {
		old.kill()
		// The snapshots share the old process's pipes: they go with it (snaps.go).
		a.dropAllSnaps("the session's Python process was restarted")
		select {
		case <-old.pumped:
		case <-time.After(time.Second):
		}
	}
	py, err := a.startPython()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restarts++
	a.py = py
	return py, err
}

// doRun runs one cell and sends its result.
func (a *agent) doRun(r *activeRun) {
	start := now()
	res := &proto.RunResult{}
	var refused *proto.Error // the REPL refused the cell before it ran (a context too many)
	var py *python
	forkAfter := false // the cell ended with its report: its step's fork may go behind the result
	reported := false  // the cell ended with its report (the Python process is the same)
	defer func() {
		res.Elapsed = now().Sub(start)
		a.mu.Lock()
		res.StdoutTruncated, res.StderrTruncated = r.truncated[0], r.truncated[1]
		a.run = nil
		if refused == nil {
			a.runs++
		}
		a.mu.Unlock()
		sa := r.req.SnapAfter
		if refused != nil {
			_ = a.send(&proto.Frame{Op: proto.OpError, ID: r.id, Error: refused})
			if sa != nil {
				_ = a.answer(sa.ID, &proto.Error{Kind: sandbox.KindConflict, Message: "the run was refused: there is no step to snapshot"})
			}
			return
		}
		if sa != nil {
			a.holdStepFiles()
		}
		_ = a.send(&proto.Frame{Op: proto.OpResult, ID: r.id, Result: res})
		sent := now()
		if forkAfter || (sa != nil && reported) {
			// The step's snapshot, asked for now, behind the result: the snapshot (below, or
			// the daemon's OpSnapshot queued behind this run) finds the fork made or under way
			// while it copies the files (snaps.go).
			if err := py.send(map[string]any{"fork": 1}); err == nil {
				a.mu.Lock()
				a.prefork = py
				a.mu.Unlock()
			}
		}
		if sa != nil {
			// Before any other request: nothing else can change the state in between.
			a.answerSnapshot(sa.ID, sa.Snap, sa.MaxBytes, false, sent)
		}
	}()
	py, restarted, err := a.currentPython()
	if err == nil {
		a.dropPrefork(py) // the daemon did not take it: this run changes the state
	}
	if err != nil {
		res.ExitCode = -1
		res.StateLost = true
		res.Error = &sandbox.PyError{Name: "AgentError", Value: err.Error()}
		return
	}
	res.StateLost = restarted
	cached, gen := a.takeFiles()
	for _, f := range r.req.Files {
		if err := a.writeFile(f.Path, f.Content, 0); err != nil {
			res.ExitCode = -1
			res.Error = &sandbox.PyError{Name: "AgentError", Value: fmt.Sprintf("input file %s: %v", f.Path, err)}
			return
		}
	}
	before := cached
	if before == nil || len(r.req.Files) > 0 {
		a.fileWatch().restartRun()
		before = a.snapshot()
	}
	cell := map[string]any{"code": r.req.Code, "env": r.req.Env, "session": r.req.Session, "limits": replLimits}
	if q := r.req; q.Context != "" || q.ContextReset {
		// The REPL's contexts (repl.py): a namespace and a working directory each.
		cell["context"], cell["context_reset"], cell["context_end"] = q.Context, q.ContextReset, q.ContextEnd
		cell["context_dir"] = q.ContextDir
		if q.ContextDir == "" {
			cell["context_dir"] = a.cfg.WorkDir
		}
	}
	// An interrupt that came before the cell is sent (while the run wrote its input files or
	// listed the work directory, or waited behind a step's snapshot) stops it here: the REPL
	// ignores SIGINT until a cell runs, so the signal would be lost, the cell would run, and
	// after the grace the process would be killed, taking the session's state with it.
	select {
	case <-r.intr:
		res.ExitCode, res.Interrupted = 1, true
		res.Error = &sandbox.PyError{Name: "KeyboardInterrupt", Traceback: "KeyboardInterrupt\n"}
		return
	default:
	}
	if err := py.send(cell); err != nil {
		log.Printf("python did not take the request: %v", err)
	}
	var timeout, kill <-chan time.Time
	if r.req.Timeout > 0 {
		t := time.NewTimer(r.req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	stop := func(grace time.Duration) {
		py.interrupt()
		if kill == nil {
			if grace <= 0 {
				grace = defaultGrace
			}
			kill = time.After(grace)
		}
	}
	for done := false; !done; {
		select {
		case rep := <-py.reports:
			if raw, ok := rep["artifact"]; ok {
				// A figure, sent as soon as it was drawn; the cell goes on.
				var art proto.Artifact
				if err := json.Unmarshal(raw, &art); err != nil || !res.AddArtifact(art) {
					log.Printf("dropped an artifact report of run %d (%d bytes)", r.id, len(raw))
				} else if r.req.StreamArtifacts {
					kept := res.Artifacts[len(res.Artifacts)-1]
					_ = a.send(&proto.Frame{Op: proto.OpArtifact, ID: r.id, Artifact: &kept})
				}
				continue
			}
			if raw, ok := rep["refused"]; ok {
				var msg string
				_ = json.Unmarshal(raw, &msg)
				refused = &proto.Error{Kind: sandbox.KindConflict, Message: msg}
				return
			}
			res.ExitCode, res.Error, res.Outputs = parseReport(rep)
			res.CPU = reportedCPU(rep)
			forkAfter = r.req.ForkAfter && r.req.Session
			reported = true
			done = true
		case <-py.exited:
			// The cell ended the process (os._exit, a crash) or was killed below. The snapshots
			// hold its pipes open: they are dropped first, so the pipes end.
			a.dropAllSnaps("the session's Python process ended")
			select {
			case <-py.pumped:
			case <-time.After(500 * time.Millisecond):
			}
			res.ExitCode = exitCode(py.status)
			res.StateLost = true
			if res.Error == nil && !res.TimedOut && !res.Interrupted {
				res.Error = &sandbox.PyError{Name: "ProcessExit", Value: "the Python process ended: " + describeStatus(py.status)}
			}
			if _, err := a.restartPython(py); err != nil {
				log.Printf("restarting python: %v", err)
			}
			done = true
		case <-timeout:
			timeout = nil
			res.TimedOut = true
			stop(r.req.Grace)
		case g := <-r.intr:
			res.Interrupted = true
			stop(g)
		case <-kill:
			kill = nil
			log.Printf("the cell did not end after an interrupt; killing python %d", py.pid)
			py.kill()
		}
	}
	var after map[string]fileState
	res.Files, res.FilesTruncated, after = a.changedFiles(before, r.req.FilesBytes)
	a.keepFiles(after, gen)
}

// replLimits are the caps the REPL keeps to, sent with each cell.
var replLimits = map[string]int{
	"contexts":       sandbox.MaxContexts,
	"artifacts":      proto.MaxArtifacts,
	"artifact_bytes": proto.MaxArtifactsBytes,
	"chart_bytes":    proto.MaxChartBytes,
	"text":           proto.MaxOutputText,
	"html":           proto.MaxOutputHTML,
	"json":           proto.MaxOutputJSON,
}

// replOutput is an output as the REPL reports it: its JSON is a string of JSON text.
type replOutput struct {
	Text string  `json:"text"`
	HTML string  `json:"html"`
	JSON *string `json:"json"`
}

// parseReport reads the REPL's report of a cell.
func parseReport(rep map[string]json.RawMessage) (int, *sandbox.PyError, []sandbox.Output) {
	var code int
	var pe *sandbox.PyError
	_ = json.Unmarshal(rep["exit"], &code)
	if e, ok := rep["error"]; ok && string(e) != "null" {
		pe = &sandbox.PyError{}
		_ = json.Unmarshal(e, pe)
	}
	var ros []replOutput
	_ = json.Unmarshal(rep["outputs"], &ros)
	outs := make([]sandbox.Output, 0, len(ros))
	for _, ro := range ros {
		o := sandbox.Output{Text: ro.Text, HTML: ro.HTML}
		if ro.JSON != nil {
			o.JSON = json.RawMessage(*ro.JSON)
		}
		outs = append(outs, o)
	}
	return code, pe, proto.BoundOutputs(outs)
}

// reportedCPU is the CPU time the REPL counted for the cell (its own and its waited-for
// children's, getrusage(2)): 0 when the report has none (a cell that ended the process).
func reportedCPU(rep map[string]json.RawMessage) time.Duration {
	var s float64
	if json.Unmarshal(rep["cpu"], &s) != nil || s < 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// fileState is what a snapshot remembers of a file.
type fileState struct {
	size  int64
	mtime time.Time
}

// maxSnapshot bounds how many entries a snapshot of the work directory looks at.
const maxSnapshot = 20000

// snapshot notes the regular files under the work directory, as the sandbox user sees them (the
// code may have made links and directories it cannot read; files.go).
func (a *agent) snapshot() map[string]fileState {
	if rawDirEmpty(a.cfg.WorkDir) {
		return map[string]fileState{}
	}
	m := map[string]fileState{}
	_ = a.asUserHere(func() error {
		m = rawSnapshot(a.cfg.WorkDir)
		return nil
	})
	return m
}

// changedFiles returns the regular files under the work directory that are new or changed since
// before, up to limit bytes of content (smallest first, so one huge file does not hide many small
// ones). It reads them as the sandbox user, not following a link at a file's name: what the code
// leaves behind after the snapshot (a link, a FIFO) is skipped, not read as root.
//
// Once the session's steps are snapshotted its directories are watched (watch.go): then only the
// paths named since the last listing are looked at, on top of before, unless the watch cannot
// say (a directory no watch covers yet, events lost): O(changes), where a listing of a work
// directory of 5000 files cost ~230 ms of every run under gVisor.
func (a *agent) changedFiles(before map[string]fileState, limit int64) (files []sandbox.File, truncated bool, after map[string]fileState) {
	w := a.fileWatch()
	if w != nil && before != nil && len(before) < maxSnapshot {
		if dirty, ok := w.takeRun(); ok {
			// The paths looked at and the changed ones read on this thread as the user: each
			// switch to another thread is a wake-up on the result's way out (asUserHere).
			_ = a.asUserHere(func() error {
				var changed []string
				if after, changed, ok = a.changedFrom(w, dirty, before, direct); ok {
					files, truncated = readChanged(changed, after, limit)
				}
				return nil
			})
			if ok {
				return files, truncated, after
			}
			w.needWalk()
		}
	}
	w.restartRun()
	if len(before) == 0 && rawDirEmpty(a.cfg.WorkDir) {
		return nil, false, map[string]fileState{}
	}
	_ = a.asUserHere(func() error {
		files, truncated, after = changedFiles(a.cfg.WorkDir, before, limit)
		return nil
	})
	return files, truncated, after
}

// changedFrom applies the paths the watch named (dirty) to before: it returns the work
// directory's regular files now and those new or changed, or false when a named directory is
// not watched (what is in it went unnamed: list it all).
func (a *agent) changedFrom(w *fileWatch, dirty map[string]struct{}, before map[string]fileState, as func(func() error) error) (map[string]fileState, []string, bool) {
	roots := a.roots()
	after := maps.Clone(before)
	var changed []string
	ok := true
	_ = as(func() error {
		for key := range dirty {
			root, sub, in := keyRoot(roots, key)
			if !in || root != 0 || sub == "" {
				continue
			}
			p := filepath.Join(a.cfg.WorkDir, sub)
			info, err := os.Lstat(p)
			if err != nil {
				delete(after, p) // gone: what was beneath it, if a directory, was named too
				continue
			}
			switch {
			case info.Mode().IsRegular():
				if sys, _ := info.Sys().(*syscall.Stat_t); sys == nil || sys.Nlink > 1 {
					// Another name of it changed too, and no event named that one.
					w.sawLinks()
					ok = false
					return nil
				}
				st := fileState{info.Size(), info.ModTime()}
				after[p] = st
				if old, had := before[p]; !had || old != st {
					changed = append(changed, p)
				}
			case info.IsDir():
				delete(after, p)
				sys, _ := info.Sys().(*syscall.Stat_t)
				if sys == nil || !w.watching(sub, sys.Ino) {
					ok = false
					return nil
				}
			default:
				delete(after, p)
			}
		}
		return nil
	})
	return after, changed, ok
}

// takeFiles takes the snapshot of the work directory the last run left (nil when there is none,
// or something may have changed the files since), and the generation a snapshot taken from now
// on belongs to (keepFiles).
//
// A run's changed files are those that differ between a snapshot before its cell and one after.
// The one after is also the next run's one before, unless the daemon asked for something that
// may change files in between (filesChanged): each snapshot walks the work directory as the
// sandbox user, ~1 ms of system calls under gVisor, so this takes one of the two walks off every
// run, and off the first run of a sandbox from the pool (its last run was the daemon's own reseed
// cell). What the code's own background threads or processes change between runs shows in the
// next run's files.
func (a *agent) takeFiles() (map[string]fileState, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.files
	a.files = nil
	return m, a.filesGen
}

// keepFiles keeps after, the snapshot at the end of a run, for the next run, unless the files
// may have changed since the run began (gen is no longer current).
func (a *agent) keepFiles(after map[string]fileState, gen uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if after != nil && gen == a.filesGen {
		a.files = after
	}
}

// filesChanged drops the kept snapshot: a request other than a run may change the work
// directory (a write, a delete, a rewind, a command).
func (a *agent) filesChanged() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files = nil
	a.filesGen++
}

func changedFiles(dir string, before map[string]fileState, limit int64) ([]sandbox.File, bool, map[string]fileState) {
	after := rawSnapshot(dir)
	var changed []string
	for p, st := range after {
		if old, ok := before[p]; !ok || old != st {
			changed = append(changed, p)
		}
	}
	files, truncated := readChanged(changed, after, limit)
	return files, truncated, after
}

// readChanged reads the changed files (as the caller's user), smallest first, up to limit bytes.
func readChanged(changed []string, after map[string]fileState, limit int64) ([]sandbox.File, bool) {
	sort.Slice(changed, func(i, j int) bool {
		si, sj := after[changed[i]].size, after[changed[j]].size
		if si != sj {
			return si < sj
		}
		return changed[i] < changed[j]
	})
	var files []sandbox.File
	var total int64
	truncated := false
	for _, p := range changed {
		if limit > 0 && total+after[p].size > limit {
			truncated = true
			continue
		}
		b, err := readNoFollow(p)
		if err != nil {
			continue
		}
		total += int64(len(b))
		files = append(files, sandbox.File{Path: p, Content: b})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, truncated
}

// readNoFollow reads the regular file p, not following a link at its name and not waiting on a
// FIFO.
func readNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, p)
}
