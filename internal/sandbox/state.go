package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sessions that outlive the daemon. With ManagerOptions.StateDir (or Records) set, the Manager
// keeps one record per session (its description, options, step tree, head and the durable
// reference of its state), written whenever a step becomes durable, on a rewind, fork, pause or
// resume: whole, or, where the records can (RecordJournal, the daemon's directory), as a small
// entry appended to the session's journal (journal.go), the whole record rewritten only now and
// then. A new Manager reads them: each session comes back asleep,
// holding no sandbox, and is woken on its next use by the tier's Restorer from the head's durable
// snapshot (or its Pause's). The environment of a session is not written (it may hold secrets): a
// session woken after a restart runs with the environment its interpreter kept in memory.

// savedSession is a session's file.
type savedSession struct {
	Info       SessionInfo    `json:"info"`
	Opts       SessionOptions `json:"opts"`
	Requested  Tier           `json:"requested"`
	Auto       bool           `json:"auto"`
	State      SessionState   `json:"state"`
	Head       string         `json:"head"`
	Ref        string         `json:"ref,omitempty"`
	ForkedFrom string         `json:"forked_from,omitempty"`
	KeptUntil  time.Time      `json:"kept_until,omitzero"`
	Steps      []*Step        `json:"steps"`
	// Seq numbers the session's record writes (journal.go): a journal entry applies to a
	// record with a lower one only. 0 in records written before journals.
	Seq uint64 `json:"seq,omitempty"`
	// Gone, in a journal entry only, names the steps forgotten since the entry before; its
	// Steps are those added or changed.
	Gone []string `json:"gone,omitempty"`
}

// SessionRecords keeps the sessions' records, so that a session outlives its daemon: in a
// directory of the daemon (ManagerOptions.StateDir, the default), or, for the nodes of a
// cluster, in storage every node sees (package sharedstore, wired by the daemon), where another
// node can adopt a session whose node is gone (Manager.Adopt).
type SessionRecords interface {
	// Save writes a session's record; refs are the durable snapshot references it holds (which
	// a shared store's collection must keep). An error wrapping ErrMoved says another node owns
	// the session now: this Manager lets it go.
	Save(id string, record []byte, refs []string) error
	// Remove forgets a closed session's record.
	Remove(id string) error
	// Release gives a session up for another node to adopt, keeping its record (a drain).
	Release(id string) error
	// Load returns the records of the sessions this Manager owns, by session id.
	Load() (map[string][]byte, error)
}

// ErrMoved says another node of the cluster owns a session now.
var ErrMoved = errors.New("the session is owned by another node now")

// dirRecords are the records in a directory of the daemon: a file per session (ID.json), and
// beside it the session's journal of changes since (ID.journal, journal.go).
type dirRecords struct{ dir string }

func (d dirRecords) file(id string) string    { return filepath.Join(d.dir, id+".json") }
func (d dirRecords) journal(id string) string { return filepath.Join(d.dir, id+journalExt) }

// Save writes the whole record, then drops the journal it includes (a kill -9 in between leaves
// entries the record's Seq says are in it already).
func (d dirRecords) Save(id string, b []byte, _ []string) error {
	if err := writeAtomic(d.file(id), b); err != nil {
		return err
	}
	if err := os.Remove(d.journal(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Append adds one entry to the session's journal, in one write. Not fsynced, as the whole
// records are not: durable means surviving the daemon (kill -9 included), not the machine.
func (d dirRecords) Append(id string, entry []byte) error {
	f, err := os.OpenFile(d.journal(id), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(entry, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Remove forgets a session: its record first, so a kill -9 in between leaves a journal without
// a record (removed by the next Load) rather than a closed session's record.
func (d dirRecords) Remove(id string) error {
	for _, f := range []string{d.file(id), d.journal(id)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (d dirRecords) Release(string) error { return nil }

// Load returns every session's record with its journal applied. A record that had a journal is
// written back whole with it and the journal removed: a torn last entry (the daemon killed in
// the middle of its write) is dropped from the file before anything is appended after it.
func (d dirRecords) Load() (map[string][]byte, error) {
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: state directory: %w", err)
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: state directory: %w", err)
	}
	out := map[string][]byte{}
	journals := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if id, ok := strings.CutSuffix(name, journalExt); ok {
			journals[id] = true
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			if strings.HasSuffix(name, ".tmp") {
				_ = os.Remove(filepath.Join(d.dir, name))
			}
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d.dir, name)); err == nil {
			out[id] = b
		}
	}
	for id := range journals {
		b, ok := out[id]
		if !ok {
			_ = os.Remove(d.journal(id)) // its session was removed
			continue
		}
		j, err := os.ReadFile(d.journal(id))
		if err != nil {
			continue
		}
		merged, err := applyJournal(b, j)
		if err != nil {
			continue // the record does not parse: revive says so
		}
		if err := d.Save(id, merged, nil); err != nil {
			return nil, fmt.Errorf("sandbox: state directory: session %s: %w", id, err)
		}
		out[id] = merged
	}
	return out, nil
}

// record is s's record as saved. Call with m.mu held.
func (m *Manager) record(s *session) savedSession {
	v := savedSession{Info: s.info, Opts: s.opts, Requested: s.requested, Auto: s.auto, State: s.tl.state,
		Head: s.tl.head, Ref: s.tl.ref, ForkedFrom: s.tl.forkedFrom, KeptUntil: s.tl.keptUntil}
	v.Opts.Env = nil
	for _, st := range s.tl.steps {
		c := *st
		v.Steps = append(v.Steps, &c)
	}
	if h := s.tl.step(s.tl.head); h != nil && v.State != SessionPaused && !s.tl.hibernated {
		v.Ref = h.Snapshot.Ref
	}
	return v
}

// refs are the durable snapshot references a record holds.
func (v *savedSession) refs() []string {
	var refs []string
	for _, st := range v.Steps {
		if st.Snapshot.Ref != "" {
			refs = append(refs, st.Snapshot.Ref)
		}
	}
	if v.Ref != "" {
		refs = append(refs, v.Ref)
	}
	return refs
}

// saveSession writes s's record. Errors are logged: the session goes on, it just would not
// survive a restart in its latest state. A record another node owns now (ErrMoved) makes this
// Manager let the session go.
func (m *Manager) saveSession(s *session) { m.writeRecord(s, nil, nil, false) }

// saveSessionWith writes s's record with change applied to it first, then calls then (when
// set) before any other write of the record: a state the Manager makes visible only once it is
// written. It reports whether the record was written.
func (m *Manager) saveSessionWith(s *session, change func(*savedSession), then func()) bool {
	return m.writeRecord(s, change, then, false)
}

// writeRecord writes s's record: an entry in its journal when the records keep journals
// (RecordJournal) and the whole record was written once, the whole record otherwise or when the
// journal is due for compaction (never when urgent: a rewind waits for this write).
func (m *Manager) writeRecord(s *session, change func(*savedSession), then func(), urgent bool) bool {
	if m.records == nil {
		return false
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	m.mu.Lock()
	if m.sessions[s.info.ID] != s {
		m.mu.Unlock()
		return false
	}
	v := m.record(s)
	m.mu.Unlock()
	if change != nil {
		change(&v)
	}
	jr := &s.journal
	var err error
	written := false
	if j, ok := m.records.(RecordJournal); ok && jr.based && (urgent || !jr.due()) {
		e := jr.entry(&v)
		var b []byte
		if b, err = json.Marshal(e); err == nil {
			err = j.Append(v.Info.ID, b)
		}
		if err == nil {
			jr.appended(&v, e.Seq, len(b))
			written = true
		} else {
			// Written whole instead, which also drops a journal the failed write may have left
			// a torn entry in.
			m.log.Warn("session journal not written; writing the whole record", "session", v.Info.ID, "err", err)
			jr.based = false
		}
	}
	if !written {
		jr.seq++
		v.Seq = jr.seq
		var b []byte
		if b, err = json.Marshal(v); err == nil {
			err = m.records.Save(v.Info.ID, b, v.refs())
		}
		if err == nil {
			jr.rebase(&v, len(b))
		} else {
			jr.based = false
		}
	}
	if errors.Is(err, ErrMoved) {
		m.log.Warn("another node owns this session now; letting it go", "session", v.Info.ID, "err", err)
		m.letGo(s)
		return false
	}
	if err != nil {
		m.log.Warn("session state not saved", "session", v.Info.ID, "err", err)
		return false
	}
	if then != nil {
		then()
	}
	return true
}

// letGo drops s from this Manager without ending it for its owner: its record stays where it
// is, its sandbox here is closed.
func (m *Manager) letGo(s *session) {
	m.mu.Lock()
	if m.sessions[s.info.ID] != s {
		m.mu.Unlock()
		return
	}
	delete(m.sessions, s.info.ID)
	impl := s.impl
	m.mu.Unlock()
	if impl != nil {
		_ = impl.Close()
	}
	if s.releaseVolumes != nil {
		s.releaseVolumes()
	}
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// forgetSession removes a closed session's record.
func (m *Manager) forgetSession(id string) {
	if m.records != nil {
		if err := m.records.Remove(id); err != nil && !errors.Is(err, ErrMoved) {
			m.log.Warn("a closed session's record was not removed", "session", id, "err", err)
		}
	}
}

// loadSessions reads the sessions an earlier daemon left in the records; they come back asleep.
func (m *Manager) loadSessions() error {
	recs, err := m.records.Load()
	if err != nil {
		return err
	}
	for id, b := range recs {
		s, _, err := m.revive(id, b)
		if err != nil {
			m.log.Warn("a saved session cannot be resumed; skipped", "session", id, "err", err)
			if errors.Is(err, errLost) {
				_ = m.records.Remove(id)
			}
			continue
		}
		s.journal.based = true // Load returned the record as it is in the records
		m.sessions[id] = s
	}
	if len(m.sessions) > 0 {
		m.log.Info("sessions found from an earlier run; each resumes on its next use", "sessions", len(m.sessions))
	}
	return nil
}

// errLost: a saved session's state was not durable; it is lost.
var errLost = errors.New("its state was not durable when its daemon stopped; it is lost")

// revive makes an asleep session from its record: it resumes, at its next use, from its latest
// durable state: the head's snapshot, a pause's, or, when the head's was not durable yet (its
// daemon was killed right after the run), the newest durable step the head came from, which
// becomes the head. It returns the session and the step it resumes at.
func (m *Manager) revive(id string, b []byte) (*session, string, error) {
	var v savedSession
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, "", err
	}
	if v.Info.ID != id {
		return nil, "", errors.New("its name and content differ")
	}
	t, ok := m.tier(v.Info.Tier)
	if !ok {
		return nil, "", fmt.Errorf("its tier %s is not run here", v.Info.Tier)
	}
	s := &session{opts: v.Opts, requested: v.Requested, auto: v.Auto, info: v.Info, impl: asleep{}}
	// What the record holds as read, before the changes below: loadSessions appends to it
	// (journal.based), Adopt, whose record is not this Manager's, writes its own first.
	s.journal.rebase(&v, len(b))
	s.journal.based, s.journal.seq = false, v.Seq
	s.tl = timeline{steps: v.Steps, head: v.Head, state: v.State, ref: v.Ref, forkedFrom: v.ForkedFrom, keptUntil: v.KeptUntil, asleep: true}
	if s.tl.state == "" {
		s.tl.state = SessionLive
	}
	s.tl.head, s.tl.ref = s.tl.resumePoint()
	if _, restorer := t.rt.(Restorer); !restorer || s.tl.head != "" && s.tl.ref == "" {
		// Its state was not durable (the tier keeps none, or the daemon stopped before): the
		// session is lost, as an ephemeral one would be.
		return nil, "", errLost
	}
	for _, st := range s.tl.steps {
		if st.Snapshot.State == SnapshotPending || st.Snapshot.State == SnapshotKept {
			st.Snapshot.State, st.Snapshot.Reason = SnapshotDropped, "in memory only when the daemon stopped"
		}
	}
	// The idle clock starts again now: a session is not reaped for the time it slept.
	s.info.LastUsed = time.Now().UTC()
	return s, s.tl.head, nil
}

// resumePoint is the step and snapshot reference a session asleep with this timeline wakes at:
// the pause's checkpoint, or the newest durable step on the head's branch.
func (tl *timeline) resumePoint() (head, ref string) {
	head, ref = tl.head, tl.ref
	if tl.state != SessionPaused && head != "" && ref == "" {
		for st := tl.step(head); st != nil; st = tl.step(st.Parent) {
			if st.Snapshot.State == SnapshotDurable && st.Snapshot.Ref != "" {
				return st.ID, st.Snapshot.Ref
			}
			if st.Parent == "" {
				break
			}
		}
	}
	return head, ref
}

// RecordResumeRef is the snapshot reference a session (its record as SessionRecords.Save got
// it) would be restored from if another node adopted it now: "" when none. For a node that
// fetches it ahead of a move (package sharedstore's prefetch).
func RecordResumeRef(record []byte) string {
	var v savedSession
	if json.Unmarshal(record, &v) != nil {
		return ""
	}
	tl := timeline{steps: v.Steps, head: v.Head, state: v.State, ref: v.Ref}
	_, ref := tl.resumePoint()
	return ref
}

// asleep is the sandbox of a session restored from the state directory and not woken yet.
type asleep struct{}

func (asleep) Run(context.Context, *RunRequest) (*Result, error) {
	return nil, Errorf(KindInternal, "the session was not woken")
}
func (asleep) Close() error { return nil }

// wake gives an asleep session its sandbox: the tier's Restorer from the session's durable state,
// or a new session when it never ran. The caller holds s.run.
func (m *Manager) wake(ctx context.Context, s *session) error {
	m.mu.Lock()
	if !s.tl.asleep {
		m.mu.Unlock()
		return nil
	}
	ref, opts, head := s.tl.ref, s.opts, s.tl.head
	id := s.info.ID
	m.mu.Unlock()
	t, _ := m.tier(s.info.Tier)
	// A session with volumes takes their leases again: the daemon that held them is gone.
	if opts.ID == "" {
		opts.ID = id
	}
	release, err := m.attachVolumes(s.info.Tenant, &opts)
	if err != nil {
		return err
	}
	var impl Session
	r, ok := t.rt.(Restorer)
	switch {
	case ref == "" && head == "":
		impl, err = t.rt.NewSession(ctx, opts)
	case ref == "":
		err = Errorf(KindConflict, "session %s's state was not durable when the daemon stopped; it is lost", id).
			WithHint("close this session and create a new one")
	case !ok:
		err = Errorf(KindConflict, "the %s runtime cannot restore sessions after a restart", s.info.Tier).
			WithHint("close this session and create a new one")
	default:
		start := time.Now()
		impl, err = r.Restore(ctx, ref, opts)
		if err == nil {
			m.log.Info("session resumed after a restart", "session", id, "took", time.Since(start))
		}
	}
	if err != nil {
		release()
		if errors.Is(err, fs.ErrNotExist) {
			err = Errorf(KindConflict, "session %s's snapshot is gone from the data directory", id)
		}
		return err
	}
	m.mu.Lock()
	s.impl, s.tl.asleep = impl, false
	s.releaseVolumes = release
	m.mu.Unlock()
	return nil
}
