package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A daemon that dies leaves an audit record of its restart and of the sessions it lost.
//
// While the daemon runs, RunningFile in the audit directory says which sessions it has open: a
// journal whose first line is a snapshot (its pid, its start time and the sessions open when the
// file was made: id, tier, tenant, agent, creation) and each further line one change (a session
// opened, moved to another tier or ended), appended with one write(2) as it happens. When the
// changes outnumber the sessions by far, a new file (a fresh snapshot) is written and renamed over
// the old, in the background: changes meanwhile go to both. The audit log's lock makes the
// directory this daemon's alone. A clean shutdown removes the file after the Manager has ended
// every session. A daemon that finds the file at start follows one that did not shut down cleanly
// (killed, crashed, its machine stopped): it replays the journal, appends a daemon.restart record
// listing the sessions that one had open and a session.close record for each (reason "lost:
// ..."), so that each session's history ends and its tenant finds the end among its own records,
// then writes a file of its own.
//
// Why a journal: the file was once rewritten whole (a new file renamed over the old) on every
// change, and a create or close waited for it; ext4 flushes a file renamed over another, which
// took 35–275 ms under other disk work, on the requests' path (docs/RATIONALE.md). An append is a
// copy into the page cache. No fsync either way: the file has to outlive the daemon's process,
// which the page cache does; a machine that stops loses at most the last changes.
//
// With the audit log off nothing is recorded, and nothing is kept.

// RunningFile is the file, in the audit directory, that says a daemon is running and which
// sessions it has open.
const RunningFile = "daemon.running"

// runningState is RunningFile's first line (and, before the journal, its whole content).
type runningState struct {
	PID      int                 `json:"pid"`
	Started  time.Time           `json:"started"`
	Sessions []audit.LostSession `json:"sessions"`
}

// runningChange is one of RunningFile's further lines: exactly one of Open, Close and Move.
type runningChange struct {
	Open  *audit.LostSession `json:"open,omitempty"`
	Close string             `json:"close,omitempty"`
	Move  string             `json:"move,omitempty"` // the session; Tier is where it runs now
	Tier  string             `json:"tier,omitempty"`
}

// compactAfter is how many changes the journal takes before it is rewritten as a snapshot: at
// least this many, and at least four per open session, so that a rewrite's cost (a few bytes per
// session) stays a small share of the appends it saves.
const compactAfter = 1024

// restartTracker is the audit sink the Manager writes to (the audit log), watching the sessions
// open and end on their way to it.
type restartTracker struct {
	l   *audit.Log
	log *slog.Logger

	mu       sync.Mutex
	path     string
	state    runningState
	sessions map[string]audit.LostSession

	// wmu serialises the journal's appends, in the order of the changes to sessions (a change is
	// made under mu while wmu is held), and guards the fields below. Runs' records, which take mu
	// only to look, never wait for it.
	wmu sync.Mutex
	// f is the journal at path; next, while a rewrite is renaming it over f, the new journal,
	// which takes the same appends.
	f, next *os.File
	// lines counts the changes in f since its snapshot; a rewrite starts at compactAt
	// (compactAfter, less in tests) or four per open session.
	lines, compactAt int
	compacting       bool
	closed           bool
	done             sync.WaitGroup // the rewrite under way
}

// Interface guards.
var (
	_ sandbox.AuditSink    = (*restartTracker)(nil)
	_ sandbox.AuditReader  = (*restartTracker)(nil)
	_ sandbox.AuditWatcher = (*restartTracker)(nil)
)

// trackRestarts records what a daemon that did not shut down cleanly left (see above) and returns
// the sink that keeps this daemon's sessions for the next start: sink itself when the audit log is
// off. It is called once the Manager is built, when nothing can fail the start any more.
//
// found are the sessions the Manager found in its state directory (sessions that outlive the
// daemon, state.go): they are not lost, and stay this daemon's.
func trackRestarts(l *audit.Log, sink sandbox.AuditSink, log *slog.Logger, found []sandbox.SessionInfo) sandbox.AuditSink {
	if l == nil {
		return sink
	}
	t := &restartTracker{l: l, log: log, path: filepath.Join(l.Dir(), RunningFile), sessions: map[string]audit.LostSession{},
		compactAt: compactAfter, state: runningState{PID: os.Getpid(), Started: time.Now().UTC()}}
	kept := map[string]bool{}
	for _, s := range found {
		kept[s.ID] = true
		t.sessions[s.ID] = audit.LostSession{ID: s.ID, Tier: string(s.Tier), Tenant: s.Tenant, Agent: s.Agent, Created: s.CreatedAt}
	}
	prev, err := readRunning(t.path)
	switch {
	case prev == nil && err != nil:
		log.Warn("the previous daemon's state is unreadable; its sessions are not recorded as lost", "file", t.path, "err", err)
		t.recordRestart(runningState{})
	case prev != nil:
		if err != nil {
			log.Warn("the previous daemon's state ends in an unreadable change; the changes before it are recorded", "file", t.path, "err", err)
		}
		prev.Sessions = slices.DeleteFunc(prev.Sessions, func(s audit.LostSession) bool { return kept[s.ID] })
		t.recordRestart(*prev)
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	b, err := t.snapshotLocked()
	t.mu.Unlock()
	if err == nil {
		t.f, err = t.create(b)
	}
	if err == nil {
		err = os.Rename(t.tmp(), t.path)
	}
	if err != nil {
		if t.f != nil {
			t.f.Close()
			t.f = nil
		}
		log.Error("the daemon's running state is not kept: a crash would not record its sessions as lost", "file", t.path, "err", err)
	}
	return t
}

// readRunning replays a previous daemon's journal: nil when there is none (it shut down cleanly,
// or there was none). A change that cannot be read ends the replay (a machine that stopped may
// leave a torn last line): the state so far is returned with the error.
func readRunning(path string) (*runningState, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	var s runningState
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	open := map[string]int{} // index in s.Sessions
	for i, ls := range s.Sessions {
		open[ls.ID] = i
	}
	for n := 1; ; n++ {
		var c runningChange
		err := dec.Decode(&c)
		if err == io.EOF {
			break
		}
		if err != nil {
			err = fmt.Errorf("%s: change %d: %w", path, n, err)
		}
		switch {
		case err != nil:
		case c.Open != nil && c.Open.ID != "":
			if i, ok := open[c.Open.ID]; ok {
				s.Sessions[i] = *c.Open
			} else {
				open[c.Open.ID] = len(s.Sessions)
				s.Sessions = append(s.Sessions, *c.Open)
			}
		case c.Close != "":
			if i, ok := open[c.Close]; ok {
				s.Sessions[i].ID = "" // dropped below
				delete(open, c.Close)
			}
		case c.Move != "":
			if i, ok := open[c.Move]; ok {
				s.Sessions[i].Tier = c.Tier
			}
		default:
			err = fmt.Errorf("%s: change %d: neither an open, a close nor a move", path, n)
		}
		if err != nil {
			s.Sessions = slices.DeleteFunc(s.Sessions, func(ls audit.LostSession) bool { return ls.ID == "" })
			return &s, err
		}
	}
	s.Sessions = slices.DeleteFunc(s.Sessions, func(ls audit.LostSession) bool { return ls.ID == "" })
	return &s, nil
}

// recordRestart appends the daemon.restart record and the lost sessions' ends.
func (t *restartTracker) recordRestart(prev runningState) {
	lost := prev.Sessions
	if lost == nil {
		lost = []audit.LostSession{}
	}
	ids := make([]string, len(lost))
	for i, s := range lost {
		ids[i] = s.ID
	}
	t.log.Warn("the previous daemon did not shut down cleanly; its sessions are lost",
		"pid", prev.PID, "started", prev.Started, "sessions", strings.Join(ids, " "))
	ctx := context.Background()
	rec := audit.Record{Kind: audit.KindDaemonRestart, Restart: &audit.Restart{
		PreviousPID: prev.PID, PreviousStart: prev.Started, Sessions: lost}}
	if err := t.l.Append(ctx, rec); err != nil {
		t.log.Error("audit record not written", "kind", rec.Kind, "err", err)
	}
	reason := fmt.Sprintf("lost: the daemon (pid %d, started %s) stopped without shutting down",
		prev.PID, prev.Started.Format(time.RFC3339))
	for _, s := range lost {
		rec := audit.Record{Kind: audit.KindSessionClose, Session: s.ID, Tenant: s.Tenant, Agent: s.Agent,
			Lifecycle: &audit.Lifecycle{Tier: s.Tier, Reason: reason}}
		if !s.Created.IsZero() {
			rec.Lifecycle.AgeMS = float64(time.Since(s.Created).Microseconds()) / 1000
		}
		if err := t.l.Append(ctx, rec); err != nil {
			t.log.Error("audit record not written", "kind", rec.Kind, "session", s.ID, "err", err)
		}
	}
}

// WatchSession collects the ids of a session's records (sandbox.AuditWatcher).
func (t *restartTracker) WatchSession(session string) func() []int64 {
	return t.l.WatchSession(session)
}

// Audit hands ev to the audit log, and notes a session that opened, moved or ended. A create or
// close returns once the journal holds it (an append, in the page cache).
func (t *restartTracker) Audit(ctx context.Context, ev sandbox.AuditEvent) error {
	err := t.l.Audit(ctx, ev)
	if ev.Session == "" {
		return err
	}
	switch ev.Kind {
	case sandbox.AuditSessionCreate, sandbox.AuditSessionClose, sandbox.AuditSessionExpire:
		t.wmu.Lock()
		defer t.wmu.Unlock()
	case sandbox.AuditRun:
		// A run takes wmu only if its session moved (rare), and looks under mu first.
		t.mu.Lock()
		s, ok := t.sessions[ev.Session]
		t.mu.Unlock()
		if !ok || ev.Run == nil || ev.Run.Tier == "" || string(ev.Run.Tier) == s.Tier {
			return err
		}
		t.wmu.Lock()
		defer t.wmu.Unlock()
	default:
		return err
	}
	var c runningChange
	t.mu.Lock()
	switch ev.Kind {
	case sandbox.AuditSessionCreate:
		if ev.Decision == sandbox.AuditAllow {
			s := audit.LostSession{ID: ev.Session, Tenant: ev.Tenant, Agent: ev.Agent, Created: time.Now().UTC()}
			if ev.Lifecycle != nil {
				s.Tier = string(ev.Lifecycle.Tier)
			}
			t.sessions[ev.Session] = s
			c.Open = &s
		}
	case sandbox.AuditSessionClose, sandbox.AuditSessionExpire:
		if ev.Decision == sandbox.AuditDeny {
			break // a close refused (one that would have kept the session): it is still open
		}
		if _, ok := t.sessions[ev.Session]; ok {
			delete(t.sessions, ev.Session)
			c.Close = ev.Session
		}
	case sandbox.AuditRun:
		// An auto session that moved runs in its new tier from then on.
		if s, ok := t.sessions[ev.Session]; ok && ev.Run != nil && ev.Run.Tier != "" && string(ev.Run.Tier) != s.Tier {
			s.Tier = string(ev.Run.Tier)
			t.sessions[ev.Session] = s
			c.Move, c.Tier = ev.Session, s.Tier
		}
	}
	open := len(t.sessions)
	t.mu.Unlock()
	if c.Open == nil && c.Close == "" && c.Move == "" {
		return err
	}
	t.appendLocked(c, open)
	return err
}

// appendLocked appends c to the journal (and to the one a rewrite is making), and starts a
// rewrite when the journal has grown enough. wmu is held.
func (t *restartTracker) appendLocked(c runningChange, open int) {
	if t.closed || t.f == nil {
		return
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.log.Error("the daemon's running state is not kept: a crash would not record its sessions as lost", "file", t.path, "err", err)
		return
	}
	b = append(b, '\n')
	if _, err := t.f.Write(b); err != nil {
		t.log.Error("the daemon's running state is not kept: a crash would not record its sessions as lost", "file", t.path, "err", err)
	}
	if t.next != nil {
		if _, err := t.next.Write(b); err != nil {
			t.log.Error("the daemon's next running state is not kept", "file", t.tmp(), "err", err)
		}
	}
	t.lines++
	if !t.compacting && t.lines >= max(t.compactAt, 4*open) {
		t.compacting = true
		t.done.Add(1)
		go t.compact()
	}
}

// compact rewrites the journal as a snapshot of the sessions open now: a new file, which takes
// the appends from then on beside the old, renamed over the old (the slow part, done without
// wmu, so that creates and closes do not wait for it), which is then closed. A daemon killed at
// any point leaves at path a journal that holds every change.
func (t *restartTracker) compact() {
	defer t.done.Done()
	t.wmu.Lock()
	if t.closed {
		t.compacting = false
		t.wmu.Unlock()
		return
	}
	t.mu.Lock()
	b, err := t.snapshotLocked()
	t.mu.Unlock()
	var next *os.File
	if err == nil {
		next, err = t.create(b)
	}
	if err != nil {
		t.compacting = false
		t.wmu.Unlock()
		t.log.Error("the daemon's running state is not rewritten", "file", t.path, "err", err)
		return
	}
	t.next = next
	t.wmu.Unlock()

	err = os.Rename(t.tmp(), t.path)

	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.compacting, t.next = false, nil
	if err != nil {
		next.Close()
		os.Remove(t.tmp())
		t.log.Error("the daemon's running state is not rewritten", "file", t.path, "err", err)
		return
	}
	t.f.Close()
	t.f, t.lines = next, 0
}

// snapshotLocked encodes the running state with the sessions as they are now, as a journal's
// first line. t.mu is held.
func (t *restartTracker) snapshotLocked() ([]byte, error) {
	t.state.Sessions = make([]audit.LostSession, 0, len(t.sessions))
	for _, s := range t.sessions {
		t.state.Sessions = append(t.state.Sessions, s)
	}
	slices.SortFunc(t.state.Sessions, func(a, b audit.LostSession) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(t.state)
	return append(b, '\n'), err
}

// tmp is where a new journal is made before it is renamed to path.
func (t *restartTracker) tmp() string { return t.path + ".tmp" }

// create makes a new journal at tmp holding b, open for appends.
func (t *restartTracker) create(b []byte) (*os.File, error) {
	f, err := os.OpenFile(t.tmp(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// QueryAudit reads the audit log.
func (t *restartTracker) QueryAudit(ctx context.Context, f sandbox.AuditFilter) ([]json.RawMessage, error) {
	return t.l.QueryAudit(ctx, f)
}

// Close is the clean shutdown: the Manager has ended every session (Audited closes its sink
// last). It removes the running state, then closes the audit log.
func (t *restartTracker) Close() error {
	t.wmu.Lock()
	t.closed = true
	t.wmu.Unlock()
	t.done.Wait() // a rewrite under way, or its rename would bring the file back
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if len(t.sessions) > 0 {
		t.log.Warn("sessions the Manager did not report ended at shutdown", "sessions", len(t.sessions))
	}
	t.mu.Unlock()
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	if t.next != nil {
		t.next.Close()
		t.next = nil
	}
	err := os.Remove(t.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.log.Error("the daemon's running state stays: the next start will record a restart", "file", t.path, "err", err)
	}
	os.Remove(t.tmp())
	return t.l.Close()
}
