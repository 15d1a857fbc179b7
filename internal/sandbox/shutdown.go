package sandbox

import (
	"context"
	"sync"
	"time"
)

// shutdownPause bounds the pause of one session when the daemon shuts down.
const shutdownPause = 30 * time.Second

// pauseForShutdown pauses, before the daemon stops, every live session whose tier can pause, when
// sessions outlive the daemon (a state directory): a tier that keeps steps in memory only (heavy:
// a checkpoint per step would cost a second) would otherwise lose the session's state with its
// sandbox, and the next daemon would find nothing durable to resume. A session whose run is in
// progress is not waited for (its state is the run's, not yet a step). The pauses run at once.
func (m *Manager) pauseForShutdown() {
	if m.records == nil {
		return
	}
	m.mu.Lock()
	var live []*session
	for _, s := range m.sessions {
		if _, ok := s.impl.(Pauser); ok && !s.tl.asleep && s.tl.state != SessionPaused {
			live = append(live, s)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		if !s.run.TryLock() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.run.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), shutdownPause)
			defer cancel()
			ref, err := s.impl.(Pauser).Pause(ctx)
			if err != nil {
				m.log.Warn("session not paused before shutdown; its state ends with the daemon", "session", s.info.ID, "err", err)
				return
			}
			m.mu.Lock()
			s.tl.state, s.tl.ref = SessionPaused, ref.Ref
			m.mu.Unlock()
			m.saveSession(s)
		}()
	}
	wg.Wait()
}
