package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Sessions that move between the nodes of a cluster. A node's Manager keeps its sessions'
// records where every node sees them (ManagerOptions.Records, package sharedstore). When a node
// is gone or drains, another node's Manager adopts its sessions from their records (Adopt): each
// comes back asleep and is restored at its next use from its latest durable step, and the first
// run's result carries a Notice saying so. Deciding that a node is gone and winning the session
// (exactly one node does) is the caller's business (internal/nodeapi, over the shared store).

// Notice tells a client what happened to its session between two of its requests.
type Notice struct {
	// Kind is NoticeSessionMoved.
	Kind string `json:"kind"`
	// FromNode and ToNode name the nodes the session moved between.
	FromNode string `json:"from_node,omitempty"`
	ToNode   string `json:"to_node,omitempty"`
	// Step is the step the session resumed from: its state is that step's (runs after it, if
	// any, were lost with the node).
	Step string `json:"step,omitempty"`
	// Reason says why it moved ("node a is gone", "node a drained").
	Reason string `json:"reason,omitempty"`
}

// Notice kinds.
const (
	// NoticeSessionMoved: the session now runs on another node.
	NoticeSessionMoved = "session_moved"
	// NoticeNotDurable: the session's steps stay in memory only, for a reason that lasts (Reason
	// says it); if its node is lost, or its daemon killed, it resumes from Step, its latest
	// durable step ("" when none: it would be lost). Given once, until a step is durable again.
	NoticeNotDurable = "not_durable"
)

// NoticeSink is an optional ability of an OutputSink: it takes a notice before the run's output
// (a streamed run's first event).
type NoticeSink interface {
	Notice(n Notice)
}

// RecordTenant is the tenant that owns the session a record (as SessionRecords.Save got it)
// describes: who may ask another node to adopt it (internal/nodeapi checks it first).
func RecordTenant(record []byte) (string, error) {
	var v struct {
		Info struct {
			Tenant string `json:"tenant"`
		} `json:"info"`
	}
	if err := json.Unmarshal(record, &v); err != nil {
		return "", fmt.Errorf("a session record that does not parse: %w", err)
	}
	return v.Info.Tenant, nil
}

// RecordInfo describes the session a record (as SessionRecords.Save got it) is of, as Session
// would on the node that holds it: for the nodes of a cluster that list every node's sessions.
func RecordInfo(record []byte) (SessionInfo, error) {
	var v savedSession
	if err := json.Unmarshal(record, &v); err != nil {
		return SessionInfo{}, fmt.Errorf("a session record that does not parse: %w", err)
	}
	info := v.Info
	info.State, info.Head, info.Steps, info.ForkedFrom = v.State, v.Head, len(v.Steps), v.ForkedFrom
	if info.State == "" {
		info.State = SessionLive
	}
	return info, nil
}

// Adopt takes a session from its record (as SessionRecords.Save got it on the node that owned
// it), asleep: its next use restores it from its latest durable step. notice (its Step filled
// here) goes with the first run's result. Adopting a session this Manager holds already is a
// no-op that returns it.
func (m *Manager) Adopt(id string, record []byte, notice Notice) (SessionInfo, error) {
	m.mu.Lock()
	if s, ok := m.sessions[id]; ok && s.impl != nil {
		info := s.info
		m.mu.Unlock()
		return m.describe(s, info), nil
	}
	switch {
	case m.closed:
		m.mu.Unlock()
		return SessionInfo{}, Errorf(KindRuntimeUnavailable, "the daemon is shutting down")
	case m.draining:
		m.mu.Unlock()
		return SessionInfo{}, Errorf(KindRuntimeUnavailable, "this node is draining").WithHint("adopt the session on another node")
	case len(m.sessions) >= m.maxSessions:
		m.mu.Unlock()
		return SessionInfo{}, Errorf(KindConflict, "%d sessions are open, the node's maximum", m.maxSessions).
			WithHint("adopt the session on another node")
	}
	m.mu.Unlock()
	s, step, err := m.revive(id, record)
	if err != nil {
		if errors.Is(err, errLost) {
			return SessionInfo{}, Errorf(KindConflict, "session %s cannot move: %v", id, err).
				WithHint("create a new session")
		}
		return SessionInfo{}, Errorf(KindConflict, "session %s's record cannot be adopted: %v", id, err)
	}
	notice.Step = step
	if notice.Kind == "" {
		notice.Kind = NoticeSessionMoved
	}
	s.notice = &notice
	m.mu.Lock()
	if cur, ok := m.sessions[id]; ok && cur.impl != nil { // adopted concurrently
		info := cur.info
		m.mu.Unlock()
		return m.describe(cur, info), nil
	}
	m.sessions[id] = s
	info := s.info
	m.mu.Unlock()
	m.saveSession(s)
	m.log.Info("session adopted", "session", id, "from", notice.FromNode, "step", step, "reason", notice.Reason)
	return m.describe(s, info), nil
}

// Records is where the Manager keeps its sessions' records (nil: in memory only).
func (m *Manager) Records() SessionRecords { return m.records }

// takeNotice returns the session's pending notice, if any, and clears it.
func (m *Manager) takeNotice(s *session) *Notice {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := s.notice
	s.notice = nil
	return n
}

// Draining says Drain was called: the node takes no new sessions.
func (m *Manager) Draining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// Drain stops taking new sessions (and adoptions) and gives every session up for another node to
// adopt: each is made durable (paused where its tier can pause, else its queued snapshots
// written), its record released (SessionRecords.Release), and it is let go here. It returns the
// sessions released; a session that could not be made durable is released at its newest durable
// step (its record says which).
func (m *Manager) Drain(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	m.draining = true
	ids := make([]string, 0, len(m.sessions))
	for id, s := range m.sessions {
		if s.impl != nil {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	var released []string
	var first error
	for _, id := range ids {
		if err := m.release(ctx, id); err != nil {
			m.log.Warn("drain: session not released", "session", id, "err", err)
			if first == nil {
				first = fmt.Errorf("session %s: %w", id, err)
			}
			continue
		}
		released = append(released, id)
	}
	return released, first
}

// release makes one session durable and gives it up.
func (m *Manager) release(ctx context.Context, id string) error {
	s, err := m.get(id)
	if err != nil {
		return nil // closed meanwhile
	}
	m.mu.Lock()
	_, pauser := s.impl.(Pauser)
	live := !s.tl.asleep && s.tl.state != SessionPaused
	m.mu.Unlock()
	if live && pauser {
		pctx, cancel := context.WithTimeout(ctx, shutdownPause)
		_, err := m.Pause(pctx, id)
		cancel()
		if err != nil {
			m.log.Info("drain: session not paused; released at its newest durable step", "session", id, "err", err)
		}
	}
	s.run.Lock()
	defer s.run.Unlock()
	s.flush()
	m.saveSession(s)
	if m.records != nil {
		if err := m.records.Release(id); err != nil && !errors.Is(err, ErrMoved) {
			return err
		}
	}
	m.letGo(s)
	m.log.Info("session released for another node", "session", id)
	return nil
}

// persistContext is the context the session's snapshots are made durable under, cancelled when
// the session pauses or the daemon stops (a tier waiting for a quiet moment gives up then).
// Called with m.mu held.
func (s *session) persistContext() context.Context {
	if s.tl.persistCtx == nil {
		s.tl.persistCtx, s.tl.persistCancel = context.WithCancel(context.Background())
	}
	return s.tl.persistCtx
}

// hurryPersist cancels the session's waiting snapshots and waits for them; later ones get a new
// context. The cancelled one goes even while the drain is still running: flush returns when the
// queue's last step is done, before the drain sees the queue empty, and a drain that kept the
// cancelled context would hand it to every later step (which then stayed in memory for good).
// The drain takes its context per step, so the next step gets the new one.
func (m *Manager) hurryPersist(s *session) {
	m.mu.Lock()
	ctx, cancel := s.tl.persistCtx, s.tl.persistCancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.flush()
	m.mu.Lock()
	if ctx != nil && s.tl.persistCtx == ctx {
		s.tl.persistCtx, s.tl.persistCancel = nil, nil
	}
	m.mu.Unlock()
}
