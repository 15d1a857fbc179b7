package e2bwire

import (
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// E2B sandbox ids appear in host names (<port>-<sandbox id>.<domain>), so they must be DNS labels:
// lowercase letters, digits and hyphens. agentbox session ids are "sb_<hex>" on one machine and
// "sb_<node>-<hex>" in a cluster's node role (node ids are [a-z0-9]{1,32}). The mapping drops the
// underscore: "sb_0f3a…" is the sandbox "sb0f3a…", "sb_n1-0f3a…" is "sbn1-0f3a…". It is reversible
// because every session id starts with "sb_", and it keeps the node visible, so a gateway can still
// place a sandbox by its id. The longest (2+32+1+16 characters) leaves room for "49983-" within
// a label's 63.

const (
	sessionPrefix = "sb_"
	sandboxPrefix = "sb"
	maxLabel      = 63 - len("49983-")
)

// SandboxID is the E2B sandbox id of an agentbox session.
func SandboxID(sessionID string) (string, error) {
	rest, ok := strings.CutPrefix(sessionID, sessionPrefix)
	if !ok || !validRest(rest) {
		return "", sandbox.Errorf(sandbox.KindInternal, "session id %q has no E2B sandbox id (expected sb_ followed by lowercase letters, digits and hyphens)", sessionID)
	}
	return sandboxPrefix + rest, nil
}

// SessionID is the agentbox session id of an E2B sandbox id. A string that no session id maps to
// is not_found, as an unknown sandbox is: ids never say more than "no such sandbox".
func SessionID(sandboxID string) (string, error) {
	rest, ok := strings.CutPrefix(sandboxID, sandboxPrefix)
	if !ok || !validRest(rest) {
		return "", sandbox.Errorf(sandbox.KindNotFound, "sandbox %q not found", sandboxID).
			WithHint("agentbox sandbox ids start with \"sb\" followed by lowercase letters, digits and hyphens; list yours with Sandbox.list()")
	}
	return sessionPrefix + rest, nil
}

func validRest(s string) bool {
	if s == "" || len(sandboxPrefix)+len(s) > maxLabel || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
