package e2b

import "github.com/agentbox-dev/agentbox/internal/auth"

// tokens issues and checks a sandbox's access tokens (auth.SandboxTokens, where the scheme is
// described). The SDKs send the envd access token (X-Access-Token) to envd and to the code
// interpreter's execute, and the traffic access token (E2B-Traffic-Access-Token) to the code
// interpreter's other calls; agentbox hands out both on create and connect, so that every
// in-sandbox request carries one.
type tokens struct{ t auth.SandboxTokens }

// issue returns the token of kind ("envd" or "traffic") for the key keyID ("" for the daemon's
// bootstrap key) and session.
func (t tokens) issue(kind, sessionID, keyID string) string { return t.t.Issue(kind, sessionID, keyID) }

// check returns the key id a token of either kind was issued to for session.
func (t tokens) check(sessionID, token string) (string, bool) { return t.t.Check(sessionID, token) }
