package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// tokens issues and checks a sandbox's access tokens. The SDKs send the envd access token
// (X-Access-Token) to envd and to the code interpreter's execute, and the traffic access token
// (E2B-Traffic-Access-Token) to the code interpreter's other calls; agentbox hands out both on
// create and connect, so that every in-sandbox request carries one. A token names the API key it
// was issued to and is an HMAC of that key id and the session under the daemon's secret: nothing
// is stored, a restarted daemon checks the tokens it issued before, and the key's identity (its
// tenant, its scopes, whether it is still valid) is looked up on every request.
type tokens struct{ secret []byte }

const tokenPrefix = "e2bt1."

// issue returns the token of kind ("envd" or "traffic") for the key keyID ("" for the daemon's
// bootstrap key) and session.
func (t tokens) issue(kind, sessionID, keyID string) string {
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(keyID)) + "." + t.mac(kind, sessionID, keyID)
}

// check returns the key id a token of either kind was issued to for session.
func (t tokens) check(sessionID, token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
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

func (t tokens) mac(kind, sessionID, keyID string) string {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte("agentbox e2b access token\x00" + kind + "\x00" + sessionID + "\x00" + keyID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
