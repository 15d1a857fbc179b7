package webui

import (
	"crypto/sha256"
	"sync"
	"time"
)

// uiSession is one login: the API key it was made with (kept here, in the daemon's memory, and
// authenticated again on every request so a revoked key stops working at once), its synchronizer
// token, and its times.
type uiSession struct {
	key      string
	csrf     string
	created  time.Time
	lastSeen time.Time
}

// sessionTable holds the logins, keyed by the SHA-256 of the cookie's random id (so the table
// holds no value a browser could send back, should it ever be dumped). Bounded in count; an entry
// past its idle time or its maximum age is gone.
type sessionTable struct {
	mu     sync.Mutex
	byID   map[[32]byte]*uiSession
	idle   time.Duration
	maxAge time.Duration
	max    int
	now    func() time.Time
}

func newSessionTable(idle, maxAge time.Duration, max int, now func() time.Time) *sessionTable {
	return &sessionTable{byID: map[[32]byte]*uiSession{}, idle: idle, maxAge: maxAge, max: max, now: now}
}

// create starts a UI session for key and returns the cookie's value.
func (t *sessionTable) create(key string) (string, *uiSession) {
	id := randomToken()
	now := t.now()
	s := &uiSession{key: key, csrf: randomToken(), created: now, lastSeen: now}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) >= t.max {
		t.pruneLocked(now)
	}
	for len(t.byID) >= t.max {
		t.dropOldestLocked()
	}
	t.byID[sha256.Sum256([]byte(id))] = s
	return id, s
}

// get returns the live UI session of a cookie's value and marks it used.
func (t *sessionTable) get(id string) (*uiSession, bool) {
	k := sha256.Sum256([]byte(id))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byID[k]
	if !ok {
		return nil, false
	}
	if t.expired(s, now) {
		delete(t.byID, k)
		return nil, false
	}
	s.lastSeen = now
	return s, true
}

// remove ends a UI session (logout).
func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byID, sha256.Sum256([]byte(id)))
}

func (t *sessionTable) expired(s *uiSession, now time.Time) bool {
	return now.Sub(s.lastSeen) > t.idle || now.Sub(s.created) > t.maxAge
}

func (t *sessionTable) pruneLocked(now time.Time) {
	for k, s := range t.byID {
		if t.expired(s, now) {
			delete(t.byID, k)
		}
	}
}

func (t *sessionTable) dropOldestLocked() {
	var oldest [32]byte
	var at time.Time
	first := true
	for k, s := range t.byID {
		if first || s.lastSeen.Before(at) {
			oldest, at, first = k, s.lastSeen, false
		}
	}
	delete(t.byID, oldest)
}
