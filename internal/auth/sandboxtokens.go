package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// SandboxTokens issues and checks the access tokens of E2B sandboxes (the E2B front door,
// internal/e2b, hands them out on create and connect; the SDKs send them to the in-sandbox
// services). A token names the API key it was issued to and is an HMAC of that key id and the
// session under a secret derived from the daemon's key (SandboxTokenSecret): nothing is stored, a
// restarted daemon or another node of the same cluster checks the tokens any of them issued, and
// the key's identity (its tenant, its scopes, whether it is still valid) is looked up on every
// request (Keys.IdentityOfKey), so a revoked key's tokens stop working with it. It lives here,
// beside the keys, because the cluster's gateway checks them too (to know whose request it
// forwards), and front doors do not import each other.
type SandboxTokens struct{ Secret []byte }

const sandboxTokenPrefix = "e2bt1."

// SandboxTokenSecret is the tokens' secret of a daemon (or cluster) whose bootstrap key is
// apiKey: stable across restarts and the same on every node, and a new key retires every token
// issued under the old one.
func SandboxTokenSecret(apiKey string) []byte {
	s := sha256.Sum256([]byte("agentbox e2b access tokens\x00" + apiKey))
	return s[:]
}

// Issue returns the token of kind ("envd" or "traffic") for the key keyID ("" for the daemon's
// bootstrap key) and session.
func (t SandboxTokens) Issue(kind, sessionID, keyID string) string {
	return sandboxTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(keyID)) + "." + t.mac(kind, sessionID, keyID)
}

// Check returns the key id a token of either kind was issued to for session.
func (t SandboxTokens) Check(sessionID, token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, sandboxTokenPrefix)
	if !ok || len(t.Secret) == 0 {
		return "", false
	}
	enc, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	key, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	keyID := string(key)
	for _, kind := range []string{"envd", "traffic"} {
		if subtle.ConstantTimeCompare([]byte(mac), []byte(t.mac(kind, sessionID, keyID))) == 1 {
			return keyID, true
		}
	}
	return "", false
}

func (t SandboxTokens) mac(kind, sessionID, keyID string) string {
	m := hmac.New(sha256.New, t.Secret)
	m.Write([]byte("agentbox e2b access token\x00" + kind + "\x00" + sessionID + "\x00" + keyID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
