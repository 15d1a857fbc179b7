package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Scope names a kind of request a key may make.
type Scope string

// The scopes. Admin holds every other one and sees every tenant's sessions and records.
const (
	ScopeRun          Scope = "run"           // one-shot runs and routing
	ScopeSessions     Scope = "sessions"      // create, run in, list, close sessions
	ScopeFiles        Scope = "files"         // a session's files
	ScopeEgressIntent Scope = "egress-intent" // a session's egress intent
	ScopePolicyAdmin  Scope = "policy-admin"  // reload the egress policy
	ScopeAuditRead    Scope = "audit-read"    // read the audit log (a tenant's key: its own records)
	ScopeAdmin        Scope = "admin"         // everything, every tenant
)

// Scopes lists every scope, in the order help texts show them.
var Scopes = []Scope{ScopeRun, ScopeSessions, ScopeFiles, ScopeEgressIntent, ScopePolicyAdmin, ScopeAuditRead, ScopeAdmin}

// Identity is who a request's key says it is.
type Identity struct {
	sandbox.Caller
	Scopes []Scope
}

// Has reports whether the identity may make requests of scope s.
func (id Identity) Has(s Scope) bool {
	return id.Admin || slices.Contains(id.Scopes, s) || slices.Contains(id.Scopes, ScopeAdmin)
}

// KeysFile is the name of the tenant key file in the data directory.
const KeysFile = "keys.json"

// tenantKeyPrefix starts every tenant key: "abt_" + key id + "." + secret. The daemon's bootstrap
// key ("abk_..." or any AGENTBOX_API_KEY) is told apart by it.
const tenantKeyPrefix = "abt_"

// KeyRecord is a tenant key as the key file keeps it: its id and hash, never the key.
type KeyRecord struct {
	ID     string  `json:"id"`
	Tenant string  `json:"tenant"`
	Agent  string  `json:"agent,omitempty"`
	Scopes []Scope `json:"scopes"`
	// Hash is the hex SHA-256 of the key's secret part. Keys are 256 random bits, so a fast hash
	// is enough: there is nothing to guess that a slow one would protect.
	Hash    string     `json:"hash"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

type keyFile struct {
	Keys []KeyRecord `json:"keys"`
}

// Keys authenticates requests: the daemon's bootstrap key (an admin of the daemon's own tenant,
// as the one key always was) and the tenant keys in the key file, which it reads again whenever
// the file changes, so a key created, revoked or rotated by `agentbox keys` takes effect on the
// next request.
type Keys struct {
	bootstrap [sha256.Size]byte
	path      string

	mu    sync.Mutex
	stamp fileStamp
	byID  map[string]KeyRecord
}

type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// NewKeys returns an authenticator for the bootstrap key and the key file at path ("" for none).
func NewKeys(bootstrap, path string) (*Keys, error) {
	if bootstrap == "" {
		return nil, errors.New("auth: an API key is required")
	}
	return &Keys{bootstrap: sha256.Sum256([]byte(bootstrap)), path: path, byID: map[string]KeyRecord{}}, nil
}

// Authenticate returns the identity of a bearer token. A missing, unknown, revoked or expired key
// is an *sandbox.Error of kind unauthorized that says which.
func (k *Keys) Authenticate(token string, now time.Time) (Identity, error) {
	if id, secret, ok := ParseTenantKey(token); ok {
		rec, found, err := k.lookup(id)
		if err != nil {
			return Identity{}, err
		}
		got := sha256.Sum256([]byte(secret))
		want, _ := hex.DecodeString(rec.Hash)
		if !found || subtle.ConstantTimeCompare(got[:], want) != 1 {
			return Identity{}, invalidKey()
		}
		return rec.identity(now)
	}
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], k.bootstrap[:]) != 1 {
		return Identity{}, invalidKey()
	}
	return bootstrapIdentity(), nil
}

func bootstrapIdentity() Identity {
	return Identity{Caller: sandbox.Caller{Admin: true}, Scopes: []Scope{ScopeAdmin}}
}

// identity is the identity of a key whose secret was checked: refused when revoked or expired.
func (rec KeyRecord) identity(now time.Time) (Identity, error) {
	switch {
	case rec.Revoked != nil:
		return Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "the API key %s was revoked at %s", rec.ID, rec.Revoked.UTC().Format(time.RFC3339)).
			WithHint("ask the daemon's admin for a new key (agentbox keys create)")
	case rec.Expires != nil && !now.Before(*rec.Expires):
		return Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "the API key %s expired at %s", rec.ID, rec.Expires.UTC().Format(time.RFC3339)).
			WithHint("ask the daemon's admin for a new key (agentbox keys rotate %s)", rec.ID)
	}
	return Identity{Caller: sandbox.Caller{Tenant: rec.Tenant, Agent: rec.Agent, KeyID: rec.ID,
		Admin: slices.Contains(rec.Scopes, ScopeAdmin)}, Scopes: rec.Scopes}, nil
}

// IdentityOfKey returns the identity of the key with id keyID as it is now ("" is the daemon's
// bootstrap key), for a front door that holds a credential it issued to that key earlier (the E2B
// front door's sandbox access tokens) instead of the key itself: a key revoked, expired or
// removed since is refused as Authenticate would refuse it.
func (k *Keys) IdentityOfKey(keyID string, now time.Time) (Identity, error) {
	if keyID == "" {
		return bootstrapIdentity(), nil
	}
	rec, found, err := k.lookup(keyID)
	if err != nil {
		return Identity{}, err
	}
	if !found {
		return Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "the API key %s no longer exists", keyID).
			WithHint("ask the daemon's admin for a new key (agentbox keys create)")
	}
	return rec.identity(now)
}

func invalidKey() error {
	return sandbox.Errorf(sandbox.KindUnauthorized, "the API key is not valid").
		WithHint("use the key of this daemon (AGENTBOX_API_KEY in its environment or the file api_key in its data directory) or a key made for you with agentbox keys create")
}

// lookup finds a key record, reading the key file again when it changed since the last read.
func (k *Keys) lookup(id string) (KeyRecord, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.path != "" {
		if err := k.refresh(); err != nil {
			return KeyRecord{}, false, sandbox.Errorf(sandbox.KindInternal, "reading the key file: %v", err)
		}
	}
	rec, ok := k.byID[id]
	return rec, ok, nil
}

// refresh reads the key file when its size, time or inode changed (a rewrite by rename changes
// the inode). A missing file is no keys. The caller holds k.mu.
func (k *Keys) refresh() error {
	st, err := os.Stat(k.path)
	if errors.Is(err, fs.ErrNotExist) {
		k.stamp, k.byID = fileStamp{}, map[string]KeyRecord{}
		return nil
	}
	if err != nil {
		return err
	}
	stamp := fileStamp{size: st.Size(), mtime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		stamp.ino = sys.Ino
	}
	if stamp == k.stamp {
		return nil
	}
	f, err := ReadKeyFile(k.path)
	if err != nil {
		return err
	}
	byID := make(map[string]KeyRecord, len(f))
	for _, r := range f {
		byID[r.ID] = r
	}
	k.stamp, k.byID = stamp, byID
	return nil
}

// ParseTenantKey splits a tenant key "abt_<id>.<secret>" into its id and secret.
func ParseTenantKey(token string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(token, tenantKeyPrefix)
	if !ok {
		return "", "", false
	}
	id, secret, ok = strings.Cut(rest, ".")
	if !ok || !keyIDPattern.MatchString(id) || len(secret) < 32 || len(secret) > 128 {
		return "", "", false
	}
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", "", false
		}
	}
	return id, secret, true
}

var (
	keyIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)
	namePattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
)

// ReadKeyFile returns the records of a key file; a missing file has none.
func ReadKeyFile(path string) ([]KeyRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return f.Keys, nil
}

// NewKey makes a tenant key: the key itself, shown once, and the record the key file keeps.
func NewKey(tenant, agent string, scopes []Scope, ttl time.Duration, now time.Time) (string, KeyRecord, error) {
	if !namePattern.MatchString(tenant) {
		return "", KeyRecord{}, fmt.Errorf("tenant %q: use 1 to 63 lowercase letters, digits, '.', '_' or '-'", tenant)
	}
	if agent != "" && !namePattern.MatchString(agent) {
		return "", KeyRecord{}, fmt.Errorf("agent %q: use 1 to 63 lowercase letters, digits, '.', '_' or '-'", agent)
	}
	if len(scopes) == 0 {
		return "", KeyRecord{}, fmt.Errorf("a key needs at least one scope (%s)", scopeList())
	}
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return "", KeyRecord{}, fmt.Errorf("unknown scope %q (use %s)", s, scopeList())
		}
	}
	var idb [8]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", KeyRecord{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", KeyRecord{}, err
	}
	id := hex.EncodeToString(idb[:])
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(s))
	rec := KeyRecord{ID: id, Tenant: tenant, Agent: agent, Scopes: slices.Clone(scopes),
		Hash: hex.EncodeToString(sum[:]), Created: now.UTC()}
	if ttl > 0 {
		exp := now.Add(ttl).UTC()
		rec.Expires = &exp
	}
	return tenantKeyPrefix + id + "." + s, rec, nil
}

func scopeList() string {
	s := make([]string, len(Scopes))
	for i, sc := range Scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ", ")
}

// UpdateKeyFile changes the key file under an exclusive lock (a sibling .lock file) and writes it
// back atomically (a private temporary file renamed into place, mode 0600), so the daemon never
// reads a half-written file and two writers never lose each other's keys.
func UpdateKeyFile(path string, change func([]KeyRecord) ([]KeyRecord, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	recs, err := ReadKeyFile(path)
	if err != nil {
		return err
	}
	if recs, err = change(recs); err != nil {
		return err
	}
	b, err := json.MarshalIndent(keyFile{Keys: recs}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// KeyDigest names a key without holding it: its id ("" for the bootstrap key) and the SHA-256
// of its secret (of the whole token for the bootstrap key), which is what the key file keeps. A
// front door that must check a key again later (the web console's logins, kept across a daemon
// restart) keeps the digest, never the key: the digest alone opens nothing.
type KeyDigest struct {
	ID   string
	Hash [32]byte
}

// DigestOf is the digest of token, as AuthenticateDigest checks it.
func DigestOf(token string) KeyDigest {
	if id, secret, ok := ParseTenantKey(token); ok {
		return KeyDigest{ID: id, Hash: sha256.Sum256([]byte(secret))}
	}
	return KeyDigest{Hash: sha256.Sum256([]byte(token))}
}

// AuthenticateDigest returns the identity of the key d names as it is now, refused as
// Authenticate refuses its token: unknown, rotated (another secret), revoked or expired, or a
// bootstrap key that is not this daemon's any more.
func (k *Keys) AuthenticateDigest(d KeyDigest, now time.Time) (Identity, error) {
	if d.ID == "" {
		if subtle.ConstantTimeCompare(d.Hash[:], k.bootstrap[:]) != 1 {
			return Identity{}, invalidKey()
		}
		return bootstrapIdentity(), nil
	}
	rec, found, err := k.lookup(d.ID)
	if err != nil {
		return Identity{}, err
	}
	want, _ := hex.DecodeString(rec.Hash)
	if !found || subtle.ConstantTimeCompare(d.Hash[:], want) != 1 {
		return Identity{}, invalidKey()
	}
	return rec.identity(now)
}
