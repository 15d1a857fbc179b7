package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/mcpserver"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The stdio MCP server of `agentbox mcp`: the MCP front door's tools over one connection, wired
// here because the CLI reaches front doors only through the daemon package. The tools are the
// ones /mcp serves (internal/mcpserver), over one of two backends: the Go client of a running
// daemon, or an engine in this process.

// MCPStdio is the connection the stdio server speaks on (newline-delimited JSON-RPC) and what it
// logs. Nothing but the protocol may be written to Out.
type MCPStdio struct {
	In  io.Reader
	Out io.Writer
	// Version is reported in the server's implementation info.
	Version string
	// Logger receives one line per tool call; it must not write to Out. Default slog.Default().
	Logger *slog.Logger
}

// ServeMCPClient serves the tools until the client disconnects or ctx is done, each call going to
// the daemon c talks to, as c's key: the daemon checks the key's scopes and ownership, and its
// error bodies come back as they are.
func ServeMCPClient(ctx context.Context, c *client.Client, s MCPStdio) error {
	return serveMCP(ctx, daemonBackend{c}, s, false)
}

// ServeMCPLocal serves the tools until the client disconnects or ctx is done, each call going to
// m, an engine in this process, as the daemon's own admin: its user is the operator, who also
// sees internal errors in full.
func ServeMCPLocal(ctx context.Context, m *sandbox.Audited, s MCPStdio) error {
	return serveMCP(ctx, mcpserver.Local(m.As(sandbox.Caller{Admin: true})), s, true)
}

func serveMCP(ctx context.Context, b mcpserver.Backend, s MCPStdio, showInternal bool) error {
	t := &mcp.IOTransport{Reader: io.NopCloser(s.In), Writer: nopWriteCloser{s.Out},
		// A file written with file_write travels in one line: allow what the daemon's body
		// limit allows.
		MaxLineLength: 96 << 20}
	err := mcpserver.Serve(ctx, t, b, mcpserver.Options{Version: s.Version, Logger: s.Logger, ShowInternalErrors: showInternal})
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil // the client hung up, or we were told to stop
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// daemonBackend is the tools' Backend over the Go client of a running daemon. The daemon's error
// bodies pass as they are (mcpserver.APIError); a daemon that stops answering is
// runtime_unavailable.
type daemonBackend struct{ c *client.Client }

// Interface guards.
var _ mcpserver.Backend = daemonBackend{}

func (d daemonBackend) Run(ctx context.Context, req api.RunRequest) (*api.Result, error) {
	r, err := d.c.Run(ctx, req)
	return r, d.wire(ctx, err)
}

func (d daemonBackend) CreateSession(ctx context.Context, req api.CreateSessionRequest) (*api.Session, error) {
	s, err := d.c.CreateSession(ctx, req)
	return s, d.wire(ctx, err)
}

func (d daemonBackend) RunInSession(ctx context.Context, id string, req api.RunRequest) (*api.Result, error) {
	r, err := d.c.RunInSession(ctx, id, req)
	return r, d.wire(ctx, err)
}

func (d daemonBackend) ListSessions(ctx context.Context) ([]api.Session, error) {
	l, err := d.c.ListSessions(ctx)
	return l, d.wire(ctx, err)
}

func (d daemonBackend) CloseSession(ctx context.Context, id string) error {
	return d.wire(ctx, d.c.CloseSession(ctx, id))
}

func (d daemonBackend) WriteFile(ctx context.Context, id, path string, content []byte) error {
	return d.wire(ctx, d.c.WriteFile(ctx, id, path, content))
}

func (d daemonBackend) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	b, err := d.c.ReadFile(ctx, id, path)
	return b, d.wire(ctx, err)
}

func (d daemonBackend) ListFiles(ctx context.Context, id, dir string) ([]api.FileInfo, error) {
	l, err := d.c.ListFiles(ctx, id, dir)
	return l, d.wire(ctx, err)
}

func (d daemonBackend) Artifact(ctx context.Context, id string) ([]byte, string, error) {
	b, mime, err := d.c.Artifact(ctx, id)
	return b, mime, d.wire(ctx, err)
}

func (d daemonBackend) Images(ctx context.Context) ([]api.Image, error) {
	l, err := d.c.Images(ctx)
	return l, d.wire(ctx, err)
}

func (d daemonBackend) SetIntent(ctx context.Context, id, name string, ttl float64) (*api.Intent, error) {
	in, err := d.c.SetIntent(ctx, id, name, ttl)
	return in, d.wire(ctx, err)
}

func (d daemonBackend) ClearIntent(ctx context.Context, id string) error {
	return d.wire(ctx, d.c.ClearIntent(ctx, id))
}

func (d daemonBackend) Audit(ctx context.Context, q mcpserver.AuditFilter) ([]api.AuditRecord, error) {
	recs, err := d.c.Audit(ctx, client.AuditQuery{Session: q.Session, Kind: q.Kind, Decision: q.Decision,
		Tenant: q.Tenant, Agent: q.Agent, Since: q.Since, Until: q.Until, Limit: q.Limit})
	return recs, d.wire(ctx, err)
}

func (d daemonBackend) Steps(ctx context.Context, id string) (*api.StepList, error) {
	l, err := d.c.Steps(ctx, id)
	return l, d.wire(ctx, err)
}

func (d daemonBackend) Rewind(ctx context.Context, id, step string) (*api.Session, error) {
	s, err := d.c.Rewind(ctx, id, step)
	return s, d.wire(ctx, err)
}

func (d daemonBackend) Fork(ctx context.Context, id, step string) (*api.Session, error) {
	s, err := d.c.Fork(ctx, id, step)
	return s, d.wire(ctx, err)
}

func (d daemonBackend) Pause(ctx context.Context, id string) (*api.Session, error) {
	s, err := d.c.Pause(ctx, id)
	return s, d.wire(ctx, err)
}

func (d daemonBackend) Resume(ctx context.Context, id string) (*api.Session, error) {
	s, err := d.c.Resume(ctx, id)
	return s, d.wire(ctx, err)
}

func (d daemonBackend) InspectStepIn(ctx context.Context, id, step, codeContext string) (*api.StepInspection, error) {
	in, err := d.c.InspectStepIn(ctx, id, step, codeContext)
	return in, d.wire(ctx, err)
}

func (d daemonBackend) DiffStepsIn(ctx context.Context, id, step, base, codeContext string) (*api.StepDiff, error) {
	df, err := d.c.DiffStepsIn(ctx, id, step, base, codeContext)
	return df, d.wire(ctx, err)
}

// wire turns the client's errors into the tools': the daemon's answer as it was, or a daemon that
// did not answer.
func (d daemonBackend) wire(ctx context.Context, err error) error {
	var ce *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return &mcpserver.APIError{Body: api.ErrorResponse{
			Error:  api.ErrorDetail{Code: ce.Code, Message: ce.Message, Hint: ce.Hint},
			Result: ce.Result,
		}}
	case ctx.Err() != nil:
		return err
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the daemon at %s did not answer: %v", d.c.URL(), err).
		WithHint("start it again with `agentbox serve`, then restart `agentbox mcp`")
}
