package auth

import (
	"slices"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Managing the key file: what `agentbox keys` and the HTTP API's /v1/keys routes both do, through
// UpdateKeyFile, so that neither loses the other's changes. Each returns typed errors
// (*sandbox.Error): invalid_request for a key that cannot be made (its message from NewKey),
// not_found for an unknown id; anything else is the file's I/O.

// Path is the key file Keys reads ("" when it has none).
func (k *Keys) Path() string { return k.path }

// Keys returns the authenticator b checks keys with.
func (b *Bearer) Keys() *Keys { return b.keys }

// CreateKey makes a tenant key, appends its record to the key file at path and returns the key,
// to be shown once (the file keeps its hash), and its record.
func CreateKey(path, tenant, agent string, scopes []Scope, ttl time.Duration, now time.Time) (string, KeyRecord, error) {
	if ttl < 0 {
		return "", KeyRecord{}, sandbox.Errorf(sandbox.KindInvalidRequest, "a key's lifetime cannot be negative (%v)", ttl).
			WithHint("give a positive lifetime, or none for a key that does not expire")
	}
	key, rec, err := NewKey(tenant, agent, scopes, ttl, now)
	if err != nil {
		return "", KeyRecord{}, sandbox.Errorf(sandbox.KindInvalidRequest, "%v", err)
	}
	err = UpdateKeyFile(path, func(recs []KeyRecord) ([]KeyRecord, error) {
		return append(recs, rec), nil
	})
	if err != nil {
		return "", KeyRecord{}, err
	}
	return key, rec, nil
}

// RevokeKey revokes the key id: the daemon refuses it from its next request on. Revoking a revoked
// key keeps its first revocation time. It returns the key's record as it now is.
func RevokeKey(path, id string, now time.Time) (KeyRecord, error) {
	var out KeyRecord
	err := UpdateKeyFile(path, func(recs []KeyRecord) ([]KeyRecord, error) {
		i := slices.IndexFunc(recs, func(r KeyRecord) bool { return r.ID == id })
		if i < 0 {
			return nil, noKey(id)
		}
		if recs[i].Revoked == nil {
			t := now.UTC()
			recs[i].Revoked = &t
		}
		out = recs[i]
		return recs, nil
	})
	return out, err
}

// RotateKey revokes the key id and makes a new one for the same tenant, agent and scopes, with the
// same lifetime counted from now. It returns the new key, to be shown once, and its record.
func RotateKey(path, id string, now time.Time) (string, KeyRecord, error) {
	var (
		key string
		rec KeyRecord
	)
	err := UpdateKeyFile(path, func(recs []KeyRecord) ([]KeyRecord, error) {
		i := slices.IndexFunc(recs, func(r KeyRecord) bool { return r.ID == id })
		if i < 0 {
			return nil, noKey(id)
		}
		old := recs[i]
		var ttl time.Duration
		if old.Expires != nil {
			ttl = old.Expires.Sub(old.Created)
		}
		var err error
		if key, rec, err = NewKey(old.Tenant, old.Agent, old.Scopes, ttl, now); err != nil {
			return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "key %s cannot be rotated: %v", id, err)
		}
		if recs[i].Revoked == nil {
			t := now.UTC()
			recs[i].Revoked = &t
		}
		return append(recs, rec), nil
	})
	if err != nil {
		return "", KeyRecord{}, err
	}
	return key, rec, nil
}

func noKey(id string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "no key %q", id).
		WithHint("list the keys and their ids with agentbox keys list or GET /v1/keys")
}
