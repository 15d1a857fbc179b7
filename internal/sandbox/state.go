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

// Sessions that outlive the daemon. With ManagerOptions.StateDir set, the Manager keeps one file
// per session there (its description, options, step tree, head and the durable reference of its
// state), rewritten whole (a temporary file renamed into place) whenever a step becomes durable,
// on a rewind, fork, pause or resume. A new Manager reads them: each session comes back asleep,
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
	Steps      []*Step        `json:"steps"`
}

func (m *Manager) sessionFile(id string) string {
	return filepath.Join(m.stateDir, id+".json")
}

// saveSession writes s's file. Errors are logged: the session goes on, it just would not survive
// a restart in its latest state.
func (m *Manager) saveSession(s *session) {
	if m.stateDir == "" {
		return
	}
	m.mu.Lock()
	if m.sessions[s.info.ID] != s {
		m.mu.Unlock()
		return
	}
	v := savedSession{Info: s.info, Opts: s.opts, Requested: s.requested, Auto: s.auto, State: s.tl.state,
		Head: s.tl.head, Ref: s.tl.ref, ForkedFrom: s.tl.forkedFrom}
	v.Opts.Env = nil
	for _, st := range s.tl.steps {
		c := *st
		v.Steps = append(v.Steps, &c)
	}
	if h := s.tl.step(s.tl.head); h != nil && v.State != SessionPaused {
		v.Ref = h.Snapshot.Ref
	}
	m.mu.Unlock()
	b, err := json.Marshal(v)
	if err == nil {
		err = writeAtomic(m.sessionFile(v.Info.ID), b)
	}
	if err != nil {
		m.log.Warn("session state not saved", "session", v.Info.ID, "err", err)
	}
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// forgetSession removes a closed session's file.
func (m *Manager) forgetSession(id string) {
	if m.stateDir != "" {
		_ = os.Remove(m.sessionFile(id))
	}
}

// loadSessions reads the sessions an earlier daemon left in the state directory; they come back
// asleep.
func (m *Manager) loadSessions() error {
	if err := os.MkdirAll(m.stateDir, 0o700); err != nil {
		return fmt.Errorf("sandbox: state directory: %w", err)
	}
	entries, err := os.ReadDir(m.stateDir)
	if err != nil {
		return fmt.Errorf("sandbox: state directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			if strings.HasSuffix(name, ".tmp") {
				_ = os.Remove(filepath.Join(m.stateDir, name))
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.stateDir, name))
		var v savedSession
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		if err == nil && (v.Info.ID+".json" != name) {
			err = errors.New("its name and content differ")
		}
		if err != nil {
			m.log.Warn("a saved session cannot be read; skipped", "file", name, "err", err)
			continue
		}
		t, ok := m.tier(v.Info.Tier)
		if !ok {
			m.log.Warn("a saved session's tier is not run here; skipped", "session", v.Info.ID, "runtime", v.Info.Tier)
			continue
		}
		if _, restorer := t.rt.(Restorer); !restorer || v.Head != "" && v.Ref == "" {
			// Its state was not durable (the tier keeps none, or the daemon stopped before): the
			// session is lost, as an ephemeral one would be.
			m.log.Warn("a saved session's state was not durable; it is lost", "session", v.Info.ID, "runtime", v.Info.Tier)
			_ = os.Remove(filepath.Join(m.stateDir, name))
			continue
		}
		s := &session{opts: v.Opts, requested: v.Requested, auto: v.Auto, info: v.Info, impl: asleep{}}
		s.tl = timeline{steps: v.Steps, head: v.Head, state: v.State, ref: v.Ref, forkedFrom: v.ForkedFrom, asleep: true}
		if s.tl.state == "" {
			s.tl.state = SessionLive
		}
		for _, st := range s.tl.steps {
			if st.Snapshot.State == SnapshotPending || st.Snapshot.State == SnapshotKept {
				st.Snapshot.State, st.Snapshot.Reason = SnapshotDropped, "in memory only when the daemon stopped"
			}
		}
		// The idle clock starts again at the restart: a session is not reaped for the time the
		// daemon was down.
		s.info.LastUsed = time.Now().UTC()
		m.sessions[v.Info.ID] = s
	}
	if len(m.sessions) > 0 {
		m.log.Info("sessions found from an earlier run; each resumes on its next use", "sessions", len(m.sessions))
	}
	return nil
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
