package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Bearer checks the header "Authorization: Bearer KEY" against the daemon's API key.
type Bearer struct {
	// keyHash is the key's SHA-256: the key itself is not kept.
	keyHash [sha256.Size]byte
}

// NewBearer returns a checker for key. An empty key is an error: there is no way to run a front
// door without authentication.
func NewBearer(key string) (*Bearer, error) {
	if key == "" {
		return nil, errors.New("auth: an API key is required")
	}
	return &Bearer{keyHash: sha256.Sum256([]byte(key))}, nil
}

// Check checks r's bearer token. Both sides are hashed before the constant-time comparison so
// that neither the key's content nor its length leaks through timing. A missing or wrong key is
// an *sandbox.Error of kind unauthorized that says how to send the right one.
func (b *Bearer) Check(r *http.Request) error {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return sandbox.Errorf(sandbox.KindUnauthorized, "this route needs an API key").
			WithHint("send the header \"Authorization: Bearer KEY\"; the daemon's key is AGENTBOX_API_KEY in its environment or the file api_key in its data directory")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], b.keyHash[:]) != 1 {
		return sandbox.Errorf(sandbox.KindUnauthorized, "the API key is not valid").
			WithHint("use the key of this daemon: AGENTBOX_API_KEY in its environment or the file api_key in its data directory")
	}
	return nil
}

// FailFunc answers a request that failed, in the front door's own format (the HTTP API writes a
// typed JSON error body).
type FailFunc func(w http.ResponseWriter, r *http.Request, err error)

// Require is middleware: next serves only requests with the key. Others get the challenge
// header "WWW-Authenticate: Bearer" and fail's answer to Check's error.
func (b *Bearer) Require(next http.Handler, fail FailFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := b.Check(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
			fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
