package daemon

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// HostedSpawn runs hosted MCP servers in rt's sandboxes, each in its own, named "mcp:NAME" to the
// egress gateway. It lives in the wiring because it is where the MCP gateway (internal/mcphost)
// meets a tier: mcphost knows processes, not runtimes.
func HostedSpawn(rt *heavy.Runtime) mcphost.SpawnFunc {
	return func(ctx context.Context, s mcphost.Server) (mcphost.Process, string, error) {
		p, err := rt.Spawn(ctx, heavy.SpawnOptions{Image: s.Image, Argv: s.Command, Session: "mcp:" + s.Name, Profile: s.Profile})
		if err != nil {
			return nil, "", err
		}
		return p, p.ImageHash, nil
	}
}

// OpenHostedMCP opens the registry of hosted MCP servers (DATA_DIR/mcp, a cluster node's DATA_DIR/nodes/ID/mcp) over the heavy tier of
// the engine; on a daemon without it, servers can be registered and listed but not called. When
// e is an engine NewManager built with its audit log on, every record of the gateway (calls,
// pins, refusals, approvals) is also a record of that signed log (kinds mcp.*), with the tenant
// and agent of the key that asked.
func OpenHostedMCP(cfg config.Config, e interface {
	Runtime(sandbox.Tier) (sandbox.Runtime, bool)
}) (*mcphost.Manager, error) {
	opts := mcphost.Options{Dir: filepath.Join(cfg.StatePath(), "mcp"), Owner: hostedOwner,
		Idle: cfg.MCP.ServerIdle.D(), MaxSessions: cfg.MCP.MaxSessions, MaxSessionsPerCaller: cfg.MCP.MaxSessionsPerKey,
		SessionIdle: cfg.MCP.SessionIdle.D()}
	if rt, ok := e.Runtime(heavy.Tier); ok {
		if hr, ok := rt.(*heavy.Runtime); ok {
			opts.Spawn = HostedSpawn(hr)
		}
	}
	if v, ok := e.(interface {
		As(sandbox.Caller) *sandbox.View
	}); ok {
		opts.Sessions = hostedSessions(v)
	}
	if a, ok := e.(*sandbox.Audited); ok {
		if l := auditLogOf(a.Sink()); l != nil {
			opts.Audit = hostedRecorder(l, slog.Default())
		}
		if gw, ok := a.Egress().(*gateway); ok && gw != nil {
			opts.Remote = gw.mcpClient
			opts.Egress = gw.Gateway // profiles' tool lists, intents during calls, alerts
		}
	}
	return mcphost.Open(opts)
}

// hostedOwner is who a request to /mcp/servers/NAME is: its tenant and key. A session of the
// gateway is used only with the key that opened it.
func hostedOwner(ctx context.Context) string {
	id, ok := auth.IdentityOf(ctx)
	if !ok {
		return ""
	}
	return id.Tenant + "\x00" + id.KeyID
}

// hostedSessions looks up a session a hosted call names, as the call's caller sees the engine:
// another tenant's session is not found, and a call without an identity names none.
func hostedSessions(e interface {
	As(sandbox.Caller) *sandbox.View
}) func(context.Context, string) (mcphost.SessionPolicy, error) {
	return func(ctx context.Context, id string) (mcphost.SessionPolicy, error) {
		ident, ok := auth.IdentityOf(ctx)
		if !ok {
			return mcphost.SessionPolicy{}, sandbox.Errorf(sandbox.KindNotFound, "session %q not found", id)
		}
		v := e.As(ident.Caller)
		info, err := v.Session(id)
		if err != nil {
			return mcphost.SessionPolicy{}, err
		}
		if !info.Network {
			return mcphost.SessionPolicy{}, nil // no profile of its own, no intent
		}
		pol := mcphost.SessionPolicy{Profile: info.EgressProfile}
		if in, err := v.Intent(id); err == nil {
			pol.Intent = in.Name
		}
		return pol, nil
	}
}

// hostedRecorder writes the gateway's records into the daemon's audit log.
func hostedRecorder(l *audit.Log, log *slog.Logger) func(context.Context, mcphost.Record) {
	return func(ctx context.Context, r mcphost.Record) {
		rec := audit.Record{Kind: audit.Kind(r.Kind), Decision: r.Decision, MCP: &audit.MCP{
			Server: r.Server, Tool: r.Tool, Intent: r.Intent, Reason: r.Reason,
			ArgsSHA256: r.ArgsSHA256, ArgsExcerpt: r.ArgsExcerpt, ResultSHA256: r.ResultSHA256, ResultExcerpt: r.ResultExcerpt,
			Findings: r.Findings, Flagged: r.Flagged, DurationMS: r.DurationMS, PinHash: r.PinHash, Changes: r.Changes,
		}}
		if id, ok := auth.IdentityOf(ctx); ok {
			rec.Tenant, rec.Agent = id.Tenant, id.Agent
		}
		rec.Session = r.Session
		if err := l.Append(context.WithoutCancel(ctx), rec); err != nil {
			log.Error("audit record not written", "kind", rec.Kind, "server", r.Server, "err", err)
		}
	}
}

// auditLogOf is the daemon's audit log behind the engine's sink: the log itself, or the log the
// restart tracker (restart.go) writes to. Nil when the log is off.
func auditLogOf(s sandbox.AuditSink) *audit.Log {
	switch s := s.(type) {
	case *audit.Log:
		return s
	case *restartTracker:
		return s.l
	}
	return nil
}

// hostedRegistry is the registry as the HTTP API sees it (httpapi.MCPRegistry), in the API's
// wire types.
type hostedRegistry struct{ m *mcphost.Manager }

func (r hostedRegistry) ListMCPServers() []api.MCPServer {
	list := r.m.List()
	out := make([]api.MCPServer, len(list))
	for i, s := range list {
		out[i] = serverToAPI(s, r.m.Running(s.Name))
	}
	return out
}

func (r hostedRegistry) AddMCPServer(s api.MCPServer) (api.MCPServer, error) {
	srv := mcphost.Server{Name: s.Name, Image: s.Image, Profile: s.Profile, Command: s.Command, URL: s.URL, Allow: s.Allow, Deny: s.Deny}
	if err := r.m.Add(srv); err != nil {
		return api.MCPServer{}, err
	}
	got, _ := r.m.Get(s.Name)
	return serverToAPI(got, false), nil
}

func (r hostedRegistry) RemoveMCPServer(name string) error { return r.m.Remove(name) }

func (r hostedRegistry) ApproveMCPServer(ctx context.Context, name string) (api.MCPPin, error) {
	p, err := r.m.Approve(ctx, name)
	if err != nil {
		return api.MCPPin{}, err
	}
	return api.MCPPin{Server: p.Server, ImageHash: p.ImageHash, Hash: p.Hash, Tools: p.Tools, Flagged: p.Flagged, Pinned: p.Pinned, Approved: p.Approved}, nil
}

func serverToAPI(s mcphost.Server, running bool) api.MCPServer {
	out := api.MCPServer{Name: s.Name, Image: s.Image, Profile: s.Profile, Command: s.Command, URL: s.URL, Allow: s.Allow, Deny: s.Deny, Running: running}
	if !s.Added.IsZero() {
		added := s.Added
		out.Added = &added
	}
	return out
}
