package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// authenticate checks the bearer token. Both sides are hashed before the constant-time
// comparison so that neither the key's content nor its length leaks through timing.
func (s *Server) authenticate(r *http.Request) error {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return sandbox.Errorf(sandbox.KindUnauthorized, "this route needs an API key").
			WithHint("send the header \"Authorization: Bearer KEY\"; the daemon's key is AGENTBOX_API_KEY in its environment or the file api_key in its data directory")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], s.keyHash[:]) != 1 {
		return sandbox.Errorf(sandbox.KindUnauthorized, "the API key is not valid").
			WithHint("use the key of this daemon: AGENTBOX_API_KEY in its environment or the file api_key in its data directory")
	}
	return nil
}
