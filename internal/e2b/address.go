package e2b

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
)

// The headers the SDKs send with every request to a service inside a sandbox, whatever the URL.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
)

// address is what a request is for: the control plane, or a port of a sandbox.
type address struct {
	control   bool
	sandboxID string
	port      int
}

// addressOf finds what r is for, in this order:
//  1. its Host under the domain: "api.<domain>" is the control plane, "<port>-<id>.<domain>" a
//     sandbox's port (the SDKs' default addressing: a wildcard name and certificate);
//  2. the headers E2b-Sandbox-Id and E2b-Sandbox-Port, which the SDKs send on every in-sandbox
//     request (one address for everything: E2B_SANDBOX_URL, the SDKs' debug mode);
//  3. otherwise the control plane (E2B_API_URL pointed at any name of the listener).
//
// A name under the domain that is neither is not found.
func (h *Handler) addressOf(r *http.Request) (address, bool) {
	host := hostOnly(r.Host)
	if label, ok := h.underDomain(host); ok {
		if label == "api" {
			return address{control: true}, true
		}
		port, id, ok := parseSandboxLabel(label)
		return address{sandboxID: id, port: port}, ok
	}
	if id := r.Header.Get(headerSandboxID); id != "" {
		port, err := strconv.Atoi(r.Header.Get(headerSandboxPort))
		if err != nil {
			port = e2bwire.EnvdPort // the header is the SDK's; without it, envd is what it speaks to
		}
		return address{sandboxID: id, port: port}, true
	}
	return address{control: true}, true
}

// Owns reports whether host is a name of the E2B front door ("api.<domain>" or a sandbox's
// "<port>-<id>.<domain>"), for a listener shared with agentbox's own front doors.
func (h *Handler) Owns(host string) bool {
	_, ok := h.underDomain(hostOnly(host))
	return ok
}

// underDomain returns the first label of host when host is directly under the domain.
func (h *Handler) underDomain(host string) (string, bool) {
	if h.domain == "" {
		return "", false
	}
	label, ok := strings.CutSuffix(host, "."+h.domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return "", false
	}
	return label, true
}

// parseSandboxLabel splits "<port>-<sandbox id>".
func parseSandboxLabel(label string) (int, string, bool) {
	p, id, ok := strings.Cut(label, "-")
	if !ok || id == "" {
		return 0, "", false
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return 0, "", false
	}
	return port, id, true
}

// hostOnly is a Host header's name, lowercase, without its port and a trailing dot.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
