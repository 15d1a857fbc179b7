package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/e2b"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/e2b/envd"
	"github.com/agentbox-dev/agentbox/internal/e2b/interp"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The E2B front door (internal/e2b) and the services it plugs in by port. Its names
// (api.DOMAIN, PORT-ID.DOMAIN) are routed to it on the main listener; it may also have a
// listener of its own, where every name is its (FrontDoors.ServeE2B).

// E2BOptions configure the E2B front door: config.E2BConfig's domain and templates.
type E2BOptions struct {
	// Enabled runs it.
	Enabled bool
	// Domain is the SDKs' E2B_DOMAIN ("" for none: a listener of its own then serves it).
	Domain string
	// Templates adds to or replaces defaultE2BTemplates.
	Templates map[string]config.E2BTemplate
	// StateFile keeps the sandboxes' E2B records (template, metadata, timeout) across restarts;
	// empty keeps them in memory (sessions.ephemeral).
	StateFile string
	// DebugUIDs are the users whose processes may use the SDKs' debug mode (ServeE2BDebug)
	// without a credential, as the daemon's own key: root and the owner of the key file.
	DebugUIDs []uint32
}

// E2BOptionsFrom is the E2B front door's part of a configuration.
func E2BOptionsFrom(c config.E2BConfig) E2BOptions {
	return E2BOptions{Enabled: c.Enabled(), Domain: c.Domain, Templates: c.Templates, DebugUIDs: []uint32{0}}
}

// defaultE2BTemplates are the E2B templates every daemon has: E2B's default templates of the
// `e2b` SDK ("base") and of `@e2b/code-interpreter` ("code-interpreter-v1") are the heavy tier's
// data-science image, which has what E2B's code interpreter template has (pandas, matplotlib,
// numpy, ...), and each image by its name.
func defaultE2BTemplates() map[string]e2b.Template {
	ds := e2b.Template{Tier: "heavy", Image: "python-datascience"}
	return map[string]e2b.Template{"base": ds, "code-interpreter-v1": ds, "code-interpreter": ds, "python-datascience": ds}
}

// newE2B builds the E2B front door over m, or nil when it is off or m cannot answer as a caller.
func newE2B(m any, keys *auth.Keys, apiKey string, o FrontDoorOptions) (*e2b.Handler, error) {
	eng, ok := m.(e2b.Engine)
	if !o.E2B.Enabled || !ok {
		return nil, nil
	}
	templates := defaultE2BTemplates()
	for id, t := range o.E2B.Templates {
		templates[id] = e2b.Template{Tier: sandbox.Tier(t.Runtime), Image: t.Image}
	}
	// The access tokens' secret follows the daemon's key: stable across restarts, and a new key
	// retires every token issued under the old one.
	return e2b.New(e2b.Options{
		Engine: eng, Keys: keys, TokenSecret: auth.SandboxTokenSecret(apiKey), Domain: o.E2B.Domain, Templates: templates, StateFile: o.E2B.StateFile,
		// The in-sandbox services, by port (internal/e2b/envd, internal/e2b/interp).
		Services: map[int]http.Handler{
			e2bwire.EnvdPort:   envd.New(envd.Options{Engine: eng}),
			e2bwire.InterpPort: interp.New(interp.Options{Engine: eng}),
		},
		Logger: o.Logger,
	})
}

// E2BDebugPorts are the ports of the SDKs' debug mode: the control plane, envd, the code
// interpreter (on localhost; ServeE2BDebug serves each).
var E2BDebugPorts = []int{e2b.DebugAPIPort, e2bwire.EnvdPort, e2bwire.InterpPort}

// ServeE2BDebug serves a listener of the SDKs' debug mode on ln (127.0.0.1 or ::1, port
// e2b.DebugAPIPort, e2bwire.EnvdPort or e2bwire.InterpPort), as Serve does the whole: see
// internal/e2b/debug.go. Requests without a credential act as the daemon's own key, and only
// for processes of E2BOptions.DebugUIDs.
func (d *FrontDoors) ServeE2BDebug(ctx context.Context, ln net.Listener, port int) error {
	if d.e2b == nil {
		return errors.New("the E2B front door is not enabled")
	}
	admin := auth.Identity{Caller: sandbox.Caller{Admin: true}, Scopes: []auth.Scope{auth.ScopeAdmin}}
	h := d.e2b.DebugHandler(port, e2b.DebugOptions{UIDs: d.debugUIDs, Identity: admin})
	return d.serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.inflight.Add(1)
		defer d.inflight.Add(-1)
		h.ServeHTTP(w, r)
	}), "", "")
}

// Interface guards.
var (
	_ e2b.Engine = (*sandbox.Manager)(nil)
	_ e2b.Engine = (*sandbox.Audited)(nil)
)
