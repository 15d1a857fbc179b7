package e2b

import (
	"context"
	"net"
	"net/http"
	"slices"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The SDKs' debug mode (E2B_DEBUG=true) is E2B's mode for a sandbox on the developer's own
// machine: the SDK sends the control plane's calls to http://localhost:3000 and a sandbox's to
// http://localhost:49983 (envd) and http://localhost:49999 (the code interpreter), and it makes no
// call at all for Sandbox.create: it names the sandbox "debug_sandbox_id" and sends no access
// token. agentbox serves it on loopback listeners of those ports (--e2b-debug): "debug_sandbox_id"
// is one sandbox of the debug template, made at its first use and made again once it is gone, and
// a sandbox made by Sandbox.create outside debug mode is reached by its id (Sandbox.connect).
//
// Since the SDK sends no credential to a sandbox in debug mode, the connecting process itself is
// checked: its user (the owner of its loopback socket, asked of the kernel's sock_diag) must
// be one of DebugOptions.UIDs, which the daemon sets to root and the owner of its key file: a
// process those users run could read the daemon's key anyway, so debug mode gives no one more
// than they have. Requests that do carry a token or a key are checked as anywhere else.

// DebugAPIPort is the control plane's port in the SDKs' debug mode.
const DebugAPIPort = 3000

// DebugSandboxID is the id the SDKs give the sandbox Sandbox.create makes in debug mode.
const DebugSandboxID = "debug_sandbox_id"

// DebugOptions configure the SDKs' debug mode.
type DebugOptions struct {
	// UIDs are the users whose processes may use a sandbox without a credential.
	UIDs []uint32
	// Identity is who such a request acts as (the daemon's own key's: its tenant).
	Identity auth.Identity
	// Template is the template of the debug sandbox. Default "code-interpreter-v1".
	Template string
}

// DebugHandler serves a debug listener on port (DebugAPIPort: the control plane, as on any
// listener; e2bwire.EnvdPort or InterpPort: that service of the sandbox the SDK names in its
// E2b-Sandbox-Id header).
func (h *Handler) DebugHandler(port int, o DebugOptions) http.Handler {
	if o.Template == "" {
		o.Template = "code-interpreter-v1"
	}
	return h.withRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if port == DebugAPIPort {
			h.control(w, r)
			return
		}
		if !hasCredentials(r) {
			if err := peerAllowed(r, o.UIDs); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		id := r.Header.Get(headerSandboxID)
		if id == "" || id == DebugSandboxID {
			var err error
			if id, err = h.debugSandbox(r.Context(), o); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		h.serviceAs(w, r, address{sandboxID: id, port: port}, &o.Identity)
	}))
}

// debugSandbox returns the id of the debug sandbox, making it when there is none (or it is gone).
func (h *Handler) debugSandbox(ctx context.Context, o DebugOptions) (string, error) {
	h.debugMu.Lock()
	defer h.debugMu.Unlock()
	v := h.eng.As(o.Identity.Caller)
	if h.debugSession != "" {
		if _, err := v.Session(h.debugSession); err == nil {
			return e2bwire.SandboxID(h.debugSession)
		}
	}
	tpl, ok := h.templates[o.Template]
	if !ok {
		return "", sandbox.Errorf(sandbox.KindNotFound, "the debug template %q is not a template of this daemon", o.Template)
	}
	info, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: tpl.Tier, Image: tpl.Image, Network: true})
	if err != nil {
		return "", err
	}
	now := h.now()
	// No E2B timeout: in debug mode the SDK never kills; the session's idle timeout ends it.
	h.remember(&record{sessionID: info.ID, templateID: o.Template, startedAt: now, caller: o.Identity.Caller})
	h.debugSession = info.ID
	h.log.Info("e2b: debug sandbox made", "session", info.ID)
	return e2bwire.SandboxID(info.ID)
}

// peerAllowed checks that the process at the other end of r's loopback connection runs as one
// of uids.
func peerAllowed(r *http.Request, uids []uint32) error {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	uid, err := loopbackPeerUID(r.RemoteAddr, local)
	if err != nil {
		return sandbox.Errorf(sandbox.KindUnauthorized, "the E2B debug listener could not tell who connected: %v", err).
			WithHint("debug mode serves processes on this machine only; send an access token or X-API-Key otherwise")
	}
	if !slices.Contains(uids, uid) {
		return sandbox.Errorf(sandbox.KindForbidden, "user %d may not use the E2B debug listener without a credential", uid).
			WithHint("debug mode serves root and the owner of the daemon's key file; others use E2B_API_URL and E2B_SANDBOX_URL with a key of their own (docs/E2B.md)")
	}
	return nil
}
