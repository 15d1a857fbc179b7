package auth

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Bearer checks the header "Authorization: Bearer KEY": the daemon's bootstrap key, or a tenant
// key of the key file (Keys).
type Bearer struct {
	keys *Keys
	now  func() time.Time
}

// NewBearer returns a checker for the bootstrap key alone (a daemon with no key file). An empty
// key is an error: there is no way to run a front door without authentication.
func NewBearer(key string) (*Bearer, error) {
	k, err := NewKeys(key, "")
	if err != nil {
		return nil, err
	}
	return NewBearerFor(k), nil
}

// NewBearerFor returns a checker for the bootstrap key and tenant keys of k.
func NewBearerFor(k *Keys) *Bearer { return &Bearer{keys: k, now: time.Now} }

// Check checks r's bearer token. Keys are hashed before the constant-time comparison, so that
// neither a key's content nor its length leaks through timing. A missing or wrong key is an
// *sandbox.Error of kind unauthorized that says how to send the right one.
func (b *Bearer) Check(r *http.Request) error {
	_, err := b.Identify(r)
	return err
}

// Identify returns who r's bearer token says it is.
func (b *Bearer) Identify(r *http.Request) (Identity, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "this route needs an API key").
			WithHint("send the header \"Authorization: Bearer KEY\"; the daemon's key is AGENTBOX_API_KEY in its environment or the file api_key in its data directory (a system install's is /var/lib/agentbox/api_key, which members of the group agentbox read)")
	}
	return b.keys.Authenticate(strings.TrimSpace(token), b.now())
}

type identityKey struct{}

// IdentityOf returns the identity Require found for the request of ctx.
func IdentityOf(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// FailFunc answers a request that failed, in the front door's own format (the HTTP API writes a
// typed JSON error body).
type FailFunc func(w http.ResponseWriter, r *http.Request, err error)

// Require is middleware: next serves only requests with a valid key that has one of scopes (any
// valid key when scopes is empty), and finds the key's identity with IdentityOf. Others get the
// challenge header "WWW-Authenticate: Bearer" (a missing or wrong key) or a forbidden error that
// names the scope, in fail's answer.
func (b *Bearer) Require(next http.Handler, fail FailFunc, scopes ...Scope) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := b.Identify(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
			fail(w, r, err)
			return
		}
		if err := id.Allows("this route", scopes...); err != nil {
			fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// Allows reports whether the identity may do what (a front door's words: "this route", "the tool
// run_code"), which needs one of scopes (any key when none): nil, or a forbidden error that names
// the scopes and what to do. Every front door words the refusal with it.
func (id Identity) Allows(what string, scopes ...Scope) error {
	if len(scopes) == 0 || slices.ContainsFunc(scopes, id.Has) {
		return nil
	}
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	want := strings.Join(names, " or ")
	return sandbox.Errorf(sandbox.KindForbidden, "the API key %s (tenant %s) lacks the %s scope %s needs", id.KeyID, id.Tenant, want, what).
		WithHint("ask the daemon's admin for a key with scope %s (agentbox keys create --scopes %s)", want, names[0])
}

// RequestKey is the API key r carries as E2B's SDKs send it (X-API-Key) or as agentbox's clients
// do (Authorization: Bearer), X-API-Key first; "" when it carries none. The E2B front door and
// the gateway in front of it read the control plane's key with it.
func RequestKey(r *http.Request) string {
	if key := strings.TrimSpace(r.Header.Get("X-API-Key")); key != "" {
		return key
	}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok)
	}
	return ""
}
