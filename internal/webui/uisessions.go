package webui

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
)

// uiSession is one login: the digest of the API key it was made with (authenticated again on
// every request, so a revoked, rotated or expired key stops working at once; the key itself is
// not kept), its synchronizer token, and its times.
type uiSession struct {
	key      auth.KeyDigest
	csrf     string
	created  time.Time
	lastSeen time.Time
}

// csrfOf is the synchronizer token of the UI session whose cookie holds id: derived from it, so
// that a table read back after a restart needs to hold neither (only the id's hash, from which
// the token cannot be computed), and another site, which cannot read the HttpOnly cookie, cannot
// compute it either.
func csrfOf(id string) string {
	sum := sha256.Sum256([]byte("agentbox-ui-csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// sessionTable holds the logins, keyed by the SHA-256 of the cookie's random id (so the table
// holds no value a browser could send back, should it ever be dumped). Bounded in count; an entry
// past its idle time or its maximum age is gone. With a file, the table is written there
// (hashes, key digests and times only) and read back by the next daemon, so a restart does not
// log people out.
type sessionTable struct {
	mu     sync.Mutex
	byID   map[[32]byte]*uiSession
	idle   time.Duration
	maxAge time.Duration
	max    int
	now    func() time.Time
	file   string
	saved  time.Time // the last write of file
	log    *slog.Logger
	// dir, when set, holds one file per login (SharedLogins), the truth every node reads.
	dir string
	// swept is when this node last removed the expired logins' files from dir (sweepLocked).
	swept time.Time
}

// shared makes the table keep each login in a file of its own in dir (when not ""), shared by the
// nodes of a cluster: created there at login, read from there by a node that has not seen it,
// checked there on every request (a logout on another node removed it), its last use written at
// most every touchEvery.
func (t *sessionTable) shared(dir string) *sessionTable {
	if dir != "" {
		t.dir, t.file = dir, ""
		t.byID = map[[32]byte]*uiSession{}
	}
	return t
}

// loginFile is the file of the login whose cookie id hashes to k.
func (t *sessionTable) loginFile(k [32]byte) string {
	return filepath.Join(t.dir, hex.EncodeToString(k[:])+".json")
}

// writeLogin writes a login's file (by a rename, mode 0600).
func (t *sessionTable) writeLogin(k [32]byte, s *uiSession) {
	b, _ := json.Marshal(savedLogin{IDSHA256: hex.EncodeToString(k[:]), KeyID: s.key.ID,
		KeySHA256: hex.EncodeToString(s.key.Hash[:]), Created: s.created, LastSeen: s.lastSeen})
	err := os.MkdirAll(t.dir, 0o700)
	if err == nil {
		tmp := t.loginFile(k) + "." + randomToken()[:8] + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, t.loginFile(k))
		}
	}
	if err != nil {
		t.log.Warn("web console: a login not shared; other nodes will ask for it again", "dir", t.dir, "err", err)
	}
}

// readLogin reads a login's file; false when there is none (or it does not parse).
func (t *sessionTable) readLogin(k [32]byte) (*uiSession, bool) {
	b, err := os.ReadFile(t.loginFile(k))
	if err != nil {
		return nil, false
	}
	var l savedLogin
	h, herr := []byte(nil), error(nil)
	if err = json.Unmarshal(b, &l); err == nil {
		h, herr = hex.DecodeString(l.KeySHA256)
	}
	if err != nil || herr != nil || len(h) != 32 {
		return nil, false
	}
	var d auth.KeyDigest
	copy(d.Hash[:], h)
	d.ID = l.KeyID
	return &uiSession{key: d, created: l.Created, lastSeen: l.LastSeen}, true
}

// sweepEvery spaces a node's sweeps of the shared logins' directory.
const sweepEvery = 10 * time.Minute

// sweepLocked removes, at most every sweepEvery, the files of logins past their idle time or
// maximum age (by the times the file holds: its last use is written at most every touchEvery,
// so a login counts as idle only touchEvery later than its real last use), and writes a failed
// rename left. A login that is never used again is found by nobody's request, so without this
// its file would stay for good. Called with t.mu held.
func (t *sessionTable) sweepLocked(now time.Time) {
	if t.dir == "" || now.Sub(t.swept) < sweepEvery {
		return
	}
	t.swept = now
	ents, err := os.ReadDir(t.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(t.dir, name)
		if strings.HasSuffix(name, ".tmp") {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(p)
			}
			continue
		}
		hexID, ok := strings.CutSuffix(name, ".json")
		raw, err := hex.DecodeString(hexID)
		if !ok || err != nil || len(raw) != 32 {
			continue // not a login's file
		}
		var k [32]byte
		copy(k[:], raw)
		s, found := t.readLogin(k)
		if !found {
			continue
		}
		if now.Sub(s.lastSeen) > t.idle+touchEvery || now.Sub(s.created) > t.maxAge {
			_ = os.Remove(p)
			delete(t.byID, k)
		}
	}
}

// touchEvery is how stale the file's last-seen times may get: a UI session's use is written at
// most this often (its idle time is minutes to hours, so a restart shortens it by at most this).
const touchEvery = time.Minute

func newSessionTable(idle, maxAge time.Duration, max int, now func() time.Time, file string, log *slog.Logger) *sessionTable {
	t := &sessionTable{byID: map[[32]byte]*uiSession{}, idle: idle, maxAge: maxAge, max: max, now: now, file: file, log: log}
	t.load()
	return t
}

// create starts a UI session for key and returns the cookie's value.
func (t *sessionTable) create(key string) (string, *uiSession) {
	id := randomToken()
	now := t.now()
	s := &uiSession{key: auth.DigestOf(key), csrf: csrfOf(id), created: now, lastSeen: now}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) >= t.max {
		t.pruneLocked(now)
	}
	for len(t.byID) >= t.max {
		t.dropOldestLocked()
	}
	k := sha256.Sum256([]byte(id))
	t.byID[k] = s
	if t.dir != "" {
		t.writeLogin(k, s)
		t.sweepLocked(now)
	}
	t.saveLocked(now)
	return id, s
}

// get returns the live UI session of a cookie's value and marks it used.
func (t *sessionTable) get(id string) (*uiSession, bool) {
	k := sha256.Sum256([]byte(id))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byID[k]
	if t.dir != "" {
		t.sweepLocked(now)
		// The login's file is the truth: made on another node, or ended there.
		f, found := t.readLogin(k)
		switch {
		case !found:
			delete(t.byID, k)
			return nil, false
		case !ok:
			if len(t.byID) >= t.max {
				t.pruneLocked(now)
			}
			for len(t.byID) >= t.max {
				t.dropOldestLocked()
			}
			s, ok = f, true
			t.byID[k] = s
		case f.lastSeen.After(s.lastSeen):
			s.lastSeen = f.lastSeen // used on another node since
		}
	}
	if !ok {
		return nil, false
	}
	if t.expired(s, now) {
		delete(t.byID, k)
		if t.dir != "" {
			_ = os.Remove(t.loginFile(k))
		}
		t.saveLocked(now)
		return nil, false
	}
	touch := now.Sub(s.lastSeen) >= touchEvery
	s.lastSeen = now
	if s.csrf == "" {
		s.csrf = csrfOf(id) // read back from the file
	}
	if t.dir != "" && touch {
		t.writeLogin(k, s)
	}
	if now.Sub(t.saved) >= touchEvery {
		t.saveLocked(now)
	}
	return s, true
}

// remove ends a UI session (logout).
func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sha256.Sum256([]byte(id))
	if t.dir != "" {
		_ = os.Remove(t.loginFile(k))
	}
	if _, ok := t.byID[k]; ok {
		delete(t.byID, k)
		t.saveLocked(t.now())
	}
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

// savedLogin is a UI session as the file keeps it.
type savedLogin struct {
	IDSHA256  string    `json:"id_sha256"`
	KeyID     string    `json:"key_id,omitempty"`
	KeySHA256 string    `json:"key_sha256"`
	Created   time.Time `json:"created"`
	LastSeen  time.Time `json:"last_seen"`
}

// saveLocked writes the live UI sessions to the file (mode 0600, by a rename, so a crash leaves
// the old file or the new one). A failure is logged: the logins go on in memory.
func (t *sessionTable) saveLocked(now time.Time) {
	if t.file == "" {
		return
	}
	t.saved = now
	t.pruneLocked(now)
	out := make([]savedLogin, 0, len(t.byID))
	for k, s := range t.byID {
		out = append(out, savedLogin{IDSHA256: hex.EncodeToString(k[:]), KeyID: s.key.ID,
			KeySHA256: hex.EncodeToString(s.key.Hash[:]), Created: s.created, LastSeen: s.lastSeen})
	}
	b, _ := json.Marshal(out)
	err := os.MkdirAll(filepath.Dir(t.file), 0o700)
	if err == nil {
		tmp := t.file + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, t.file)
		}
	}
	if err != nil {
		t.log.Warn("web console: logins not saved; a restart will log people out", "file", t.file, "err", err)
	}
}

// load reads the logins an earlier daemon left, dropping the expired ones.
func (t *sessionTable) load() {
	if t.file == "" {
		return
	}
	b, err := os.ReadFile(t.file)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var saved []savedLogin
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil {
		t.log.Warn("web console: saved logins unreadable; everyone logs in again", "file", t.file, "err", err)
		return
	}
	now := t.now()
	for _, l := range saved {
		var k [32]byte
		var d auth.KeyDigest
		id, err1 := hex.DecodeString(l.IDSHA256)
		h, err2 := hex.DecodeString(l.KeySHA256)
		if err1 != nil || err2 != nil || len(id) != 32 || len(h) != 32 {
			continue
		}
		copy(k[:], id)
		copy(d.Hash[:], h)
		d.ID = l.KeyID
		s := &uiSession{key: d, created: l.Created, lastSeen: l.LastSeen}
		if !t.expired(s, now) && len(t.byID) < t.max {
			t.byID[k] = s
		}
	}
}
