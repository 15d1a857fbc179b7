package egress

import (
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"
)

// Per-session state the exfiltration checks keep: per destination (a registrable domain, or an
// address), the distinct subdomains the session used and the bytes it sent. It is in memory,
// per node, like intents and violation counters; a session's state goes with Forget, and a
// one-shot run's (never forgotten) when idle for staleAfter.
type sessions struct {
	mu    sync.Mutex
	m     map[string]*sessionState
	calls int
}

type sessionState struct {
	last  time.Time
	dests map[string]*destState
	// failure is why the session's last request that could not reach its origin failed, and
	// when (Gateway.LastFailure).
	failure  string
	failedAt time.Time
}

type destState struct {
	names map[string]struct{} // distinct subdomain names seen, at most maxNames
	sent  int64
}

// Bounds on what one session may make the gateway keep. A session past maxDests is refused new
// destinations (a crawler that needs more is not what sandboxes are for; the reason says so).
const (
	maxDests   = 10000
	maxNames   = 4096
	staleAfter = time.Hour
)

func newSessions() *sessions { return &sessions{m: map[string]*sessionState{}} }

// state returns a session's state, creating it; s.mu must be held.
func (s *sessions) state(id string) *sessionState {
	now := time.Now()
	if s.calls++; s.calls%1024 == 0 {
		for k, st := range s.m {
			if now.Sub(st.last) > staleAfter {
				delete(s.m, k)
			}
		}
	}
	st := s.m[id]
	if st == nil {
		st = &sessionState{dests: map[string]*destState{}}
		s.m[id] = st
	}
	st.last = now
	return st
}

// dest returns a destination's state, or nil when the session has too many.
func (st *sessionState) dest(d string) *destState {
	ds := st.dests[d]
	if ds == nil {
		if len(st.dests) >= maxDests {
			return nil
		}
		ds = &destState{}
		st.dests[d] = ds
	}
	return ds
}

func (s *sessions) setFailure(id, reason string) {
	s.mu.Lock()
	st := s.state(id)
	st.failure, st.failedAt = reason, time.Now()
	s.mu.Unlock()
}

func (s *sessions) failure(id string, since time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.m[id]; st != nil && !st.failedAt.Before(since) {
		return st.failure
	}
	return ""
}

func (s *sessions) forget(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// useName counts name (a subdomain of dest) for the session. It returns how many distinct
// subdomains of dest the session has used, this one included, and whether it is within budget:
// a name already seen always is. A name past the budget is not remembered (so a refused name
// stays refused), except in count-only use (remember), where names are kept up to maxNames.
func (s *sessions) useName(session, dest, name string, budget int, remember bool) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.state(session).dest(dest)
	if ds == nil {
		return maxDests, false
	}
	if _, ok := ds.names[name]; ok {
		return len(ds.names), true
	}
	n := len(ds.names) + 1
	within := n <= budget
	if (within || remember) && len(ds.names) < maxNames {
		if ds.names == nil {
			ds.names = map[string]struct{}{}
		}
		ds.names[name] = struct{}{}
	}
	return n, within
}

// sent returns the bytes the session has sent to dest, and false when the session may not add
// another destination.
func (s *sessions) sent(session, dest string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.state(session).dest(dest)
	if ds == nil {
		return 0, false
	}
	return ds.sent, true
}

// addSent adds n bytes sent to dest and returns the new total.
func (s *sessions) addSent(session, dest string, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.state(session).dest(dest)
	if ds == nil {
		return 0
	}
	ds.sent += n
	return ds.sent
}

// destination is what volume and budgets are counted by: the registrable domain of a name (the
// public suffix list's eTLD+1, private suffixes included, so each github.io site is its own), the
// name itself when it has none (a single label, a public suffix), or the address.
func destination(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(strings.ToLower(host))
	if err != nil {
		return strings.ToLower(host)
	}
	return d
}
