package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// While the daemon runs, RunningFile in the audit directory holds its pid, its start time and the
// sessions it has open (id, tier, tenant, agent, creation), rewritten (a new file renamed over the
// old) as sessions open, move and end. The audit log's lock makes the directory this daemon's
// alone. A clean shutdown removes the file after the Manager has ended every session. A daemon
// that finds the file at start follows one that did not shut down cleanly (killed, crashed, its
// machine stopped): it appends a daemon.restart record listing the sessions that one had open and
// a session.close record for each (reason "lost: ..."), so that each session's history ends and
// its tenant finds the end among its own records, then writes a file of its own.
//
// With the audit log off nothing is recorded, and nothing is kept.

// RunningFile is the file, in the audit directory, that says a daemon is running and which
// sessions it has open.
const RunningFile = "daemon.running"

// runningState is RunningFile's content.
type runningState struct {
	PID      int                 `json:"pid"`
	Started  time.Time           `json:"started"`
	Sessions []audit.LostSession `json:"sessions"`
}

// restartTracker is the audit sink the Manager writes to (the audit log), watching the sessions
// open and end on their way to it.
type restartTracker struct {
	l   *audit.Log
	log *slog.Logger

	mu       sync.Mutex
	path     string
	state    runningState
	sessions map[string]audit.LostSession
	closed   bool
	// version counts the changes to sessions, written the last one in the file (both under mu).
	version, written uint64
	// wmu serialises the file's writes, which happen outside mu: a write (a new file and a
	// rename) can take hundreds of milliseconds on a busy disk, and every run's record takes mu.
	wmu sync.Mutex
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
		state: runningState{PID: os.Getpid(), Started: time.Now().UTC()}}
	kept := map[string]bool{}
	for _, s := range found {
		kept[s.ID] = true
		t.sessions[s.ID] = audit.LostSession{ID: s.ID, Tier: string(s.Tier), Tenant: s.Tenant, Agent: s.Agent, Created: s.CreatedAt}
	}
	if prev, err := readRunning(t.path); err != nil {
		log.Warn("the previous daemon's state is unreadable; its sessions are not recorded as lost", "file", t.path, "err", err)
		t.recordRestart(runningState{})
	} else if prev != nil {
		prev.Sessions = slices.DeleteFunc(prev.Sessions, func(s audit.LostSession) bool { return kept[s.ID] })
		t.recordRestart(*prev)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writeLocked()
	return t
}

// readRunning reads a previous daemon's state: nil when there is none (it shut down cleanly, or
// there was none).
func readRunning(path string) (*runningState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s runningState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
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

// Audit hands ev to the audit log, and notes a session that opened, moved or ended.
func (t *restartTracker) Audit(ctx context.Context, ev sandbox.AuditEvent) error {
	err := t.l.Audit(ctx, ev)
	if ev.Session == "" {
		return err
	}
	t.mu.Lock()
	changed := false
	switch ev.Kind {
	case sandbox.AuditSessionCreate:
		if ev.Decision == sandbox.AuditAllow {
			s := audit.LostSession{ID: ev.Session, Tenant: ev.Tenant, Agent: ev.Agent, Created: time.Now().UTC()}
			if ev.Lifecycle != nil {
				s.Tier = string(ev.Lifecycle.Tier)
			}
			t.sessions[ev.Session], changed = s, true
		}
	case sandbox.AuditSessionClose, sandbox.AuditSessionExpire:
		if ev.Decision == sandbox.AuditDeny {
			break // a close refused (one that would have kept the session): it is still open
		}
		_, changed = t.sessions[ev.Session]
		delete(t.sessions, ev.Session)
	case sandbox.AuditRun:
		// An auto session that moved runs in its new tier from then on.
		if s, ok := t.sessions[ev.Session]; ok && ev.Run != nil && ev.Run.Tier != "" && string(ev.Run.Tier) != s.Tier {
			s.Tier = string(ev.Run.Tier)
			t.sessions[ev.Session], changed = s, true
		}
	}
	if !changed {
		t.mu.Unlock()
		return err
	}
	t.version++
	v := t.version
	t.mu.Unlock()
	t.save(v)
	return err
}

// save writes the running state if the file does not hold change v yet. It returns once the file
// holds v or a later change; the state is taken as it is when the write begins, so concurrent
// changes share one write. Runs' records (which take mu only to look) never wait for it.
func (t *restartTracker) save(v uint64) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if t.closed || t.written >= v {
		t.mu.Unlock()
		return
	}
	b, err := t.marshalLocked()
	cur := t.version
	t.mu.Unlock()
	if err == nil {
		err = t.writeFile(b)
	}
	if err != nil {
		t.log.Error("the daemon's running state is not kept: a crash would not record its sessions as lost", "file", t.path, "err", err)
		return
	}
	t.mu.Lock()
	t.written = cur
	t.mu.Unlock()
}

// writeLocked writes the running state: a new file renamed over the old, so that a daemon killed
// while writing leaves the old state or the new, never half of one. No fsync: the file has to
// outlive the daemon's process, which the page cache does; a machine that stops loses at most the
// last changes.
func (t *restartTracker) writeLocked() {
	if t.closed {
		return
	}
	b, err := t.marshalLocked()
	if err == nil {
		err = t.writeFile(b)
	}
	if err != nil {
		t.log.Error("the daemon's running state is not kept: a crash would not record its sessions as lost", "file", t.path, "err", err)
	}
}

// marshalLocked encodes the running state with the sessions as they are now. t.mu is held.
func (t *restartTracker) marshalLocked() ([]byte, error) {
	t.state.Sessions = make([]audit.LostSession, 0, len(t.sessions))
	for _, s := range t.sessions {
		t.state.Sessions = append(t.state.Sessions, s)
	}
	slices.SortFunc(t.state.Sessions, func(a, b audit.LostSession) int { return strings.Compare(a.ID, b.ID) })
	return json.Marshal(t.state)
}

// writeFile replaces the file with b: a new file renamed over the old.
func (t *restartTracker) writeFile(b []byte) error {
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, t.path)
}

// QueryAudit reads the audit log.
func (t *restartTracker) QueryAudit(ctx context.Context, f sandbox.AuditFilter) ([]json.RawMessage, error) {
	return t.l.QueryAudit(ctx, f)
}

// Close is the clean shutdown: the Manager has ended every session (Audited closes its sink
// last). It removes the running state, then closes the audit log.
func (t *restartTracker) Close() error {
	t.wmu.Lock() // after a write under way, or it would bring the file back
	defer t.wmu.Unlock()
	t.mu.Lock()
	t.closed = true
	if len(t.sessions) > 0 {
		t.log.Warn("sessions the Manager did not report ended at shutdown", "sessions", len(t.sessions))
	}
	err := os.Remove(t.path)
	t.mu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.log.Error("the daemon's running state stays: the next start will record a restart", "file", t.path, "err", err)
	}
	return t.l.Close()
}
