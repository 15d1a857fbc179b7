package e2b

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Signed file URLs. sbx.downloadUrl(path) and sbx.uploadUrl(path) give a URL of envd's /files that
// a browser or curl fetches without headers: its query carries signature = "v1_" + base64(SHA-256
// of "path:operation:user:<envd access token>[:expiration]"), "=" trimmed, and, when the SDK was
// asked for one, signature_expiration (Unix seconds). The signature is checked against the envd
// token the sandbox's creator was issued (tokens are derived, so it is computed again here), and
// the request acts as that key, as a request carrying the token would.

// signedFile returns the identity a signed /files request acts as; ok is false when r carries no
// signature.
func (h *Handler) signedFile(r *http.Request, sessionID string) (id auth.Identity, ok bool, err error) {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" || r.URL.Path != "/files" {
		return auth.Identity{}, false, nil
	}
	op := map[string]string{http.MethodGet: "read", http.MethodPost: "write"}[r.Method]
	if op == "" {
		return auth.Identity{}, true, sandbox.Errorf(sandbox.KindUnauthorized, "a signed URL reads (GET) or writes (POST) a file, not %s", r.Method)
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":"
	exp := q.Get("signature_expiration")
	if exp != "" {
		at, perr := strconv.ParseInt(exp, 10, 64)
		if perr != nil || h.now().Unix() > at {
			return auth.Identity{}, true, sandbox.Errorf(sandbox.KindUnauthorized, "the signed URL has expired").
				WithHint("make a new one with sbx.downloadUrl or sbx.uploadUrl")
		}
	}
	h.mu.Lock()
	rec := h.sandboxes[sessionID]
	h.mu.Unlock()
	if rec != nil {
		token := h.tok.issue("envd", sessionID, rec.caller.KeyID)
		text := raw + token
		if exp != "" {
			text += ":" + exp
		}
		sum := sha256.Sum256([]byte(text))
		want := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
		if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1 {
			id, err := h.keys.IdentityOfKey(rec.caller.KeyID, h.now())
			return id, true, err
		}
	}
	return auth.Identity{}, true, sandbox.Errorf(sandbox.KindUnauthorized, "the URL's signature is not valid for this sandbox, path and operation").
		WithHint("make the URL with sbx.downloadUrl or sbx.uploadUrl of the sandbox object Sandbox.create returned")
}
