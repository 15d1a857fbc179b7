package api

import "time"

// Key is a tenant API key as the daemon keeps it (GET /v1/keys): never the key itself nor its
// hash. A key is active until it is revoked or expires.
type Key struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// Agent names who the key was issued to, for the audit log; empty when none.
	Agent string `json:"agent,omitempty"`
	// Scopes are what the key may do: run, sessions, files, egress-intent, policy-admin,
	// audit-read, admin.
	Scopes  []string  `json:"scopes"`
	Created time.Time `json:"created"`
	// Expires is when the key stops working; nil for never.
	Expires *time.Time `json:"expires,omitempty"`
	// Revoked is when the key was revoked (or rotated out); nil while it is not.
	Revoked *time.Time `json:"revoked,omitempty"`
}

// KeyList is the body of GET /v1/keys, in the order the keys were created.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	// Tenant the key belongs to: 1 to 63 lowercase letters, digits, '.', '_' or '-'.
	Tenant string `json:"tenant"`
	// Agent, optional, names who the key is for (the same characters as Tenant).
	Agent string `json:"agent,omitempty"`
	// Scopes the key has; at least one.
	Scopes []string `json:"scopes"`
	// TTL is the key's lifetime in seconds; 0 or absent for a key that does not expire.
	TTL float64 `json:"ttl,omitempty"`
}

// CreatedKey is the answer of POST /v1/keys and POST /v1/keys/{id}/rotate: the key, shown this
// once (the daemon keeps only its hash), and its record.
type CreatedKey struct {
	Key    string `json:"key"`
	Record Key    `json:"record"`
}
