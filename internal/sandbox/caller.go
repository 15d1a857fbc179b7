package sandbox

import "context"

// Caller is who asks: the tenant and the agent an API key names, as a front door's authentication
// found them. Sessions, artifacts and intents belong to the tenant that made them; another
// tenant's caller gets not_found for them, as if they did not exist, so ids never reveal what
// another tenant has.
type Caller struct {
	// Tenant owns what this caller makes. Empty is the daemon's own tenant: the bootstrap key of a
	// daemon with no tenants configured, which behaves as the daemon always did.
	Tenant string
	// Agent names the agent the key was issued to, for the audit log.
	Agent string
	// KeyID names the key (never the key itself), for the audit log.
	KeyID string
	// Admin sees and acts on every tenant's sessions, artifacts and records.
	Admin bool
}

// owns reports whether c may see something owned by tenant.
func (c Caller) owns(tenant string) bool { return c.Admin || c.Tenant == tenant }

type callerKey struct{}

// WithCaller returns ctx carrying c: the Manager records what c makes as c's tenant's, and the
// audit decorator attributes c's requests to c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller ctx carries. Without one (the daemon's own work: the reaper, an
// egress alert, tests of the core) the caller is the daemon itself, an admin of the empty tenant.
func CallerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Caller{Admin: true}
}
