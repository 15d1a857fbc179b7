package mcpserver

import (
	"context"
	"path"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The scopes of the tools: those of their routes (internal/httpapi/routes.go).
var (
	scopeRun           = []auth.Scope{auth.ScopeRun}
	scopeSessions      = []auth.Scope{auth.ScopeSessions}
	scopeFiles         = []auth.Scope{auth.ScopeFiles}
	scopeIntent        = []auth.Scope{auth.ScopeEgressIntent}
	scopeRunOrSessions = []auth.Scope{auth.ScopeRun, auth.ScopeSessions}
	scopeAuditRead     = []auth.Scope{auth.ScopeAuditRead}
)

// Bounds of audit_query's limit, those of GET /v1/audit.
const (
	auditDefaultLimit = 100
	auditMaxLimit     = 1000
)

func ptr[T any](v T) *T { return &v }

// addTools registers every tool.
func addTools(srv *mcp.Server, s *server) error {
	for _, add := range []func() error{
		func() error {
			return add(srv, s, tool[api.RunRequest, api.Result]{
				name: "run_code", title: "Run Python code", op: "run", scopes: scopeRun,
				lead: "Runs Python code once in a fresh sandbox and returns what it printed (stdout, stderr), the exception it raised, the tier that ran it and why (routing reasons), figures as images and displayed values (a DataFrame) as text and HTML.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(false)},
				call: func(ctx context.Context, b Backend, in api.RunRequest) (api.Result, []mcp.Content, error) {
					return runResult(ctx, b)(b.Run(ctx, in))
				},
			})
		},
		func() error {
			return add(srv, s, tool[api.CreateSessionRequest, api.Session]{
				name: "session_create", title: "Create a session", op: "createSession", scopes: scopeSessions,
				lead: "Starts a session: one interpreter kept alive, so that variables, imports and files of a session_run are there for the next. Close it with session_close.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(false)},
				call: func(ctx context.Context, b Backend, in api.CreateSessionRequest) (api.Session, []mcp.Content, error) {
					s, err := b.CreateSession(ctx, in)
					if err != nil {
						return api.Session{}, nil, err
					}
					return *s, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[SessionRunInput, api.Result]{
				name: "session_run", title: "Run code in a session", op: "runInSession", scopes: scopeSessions,
				lead: "Runs Python code in a session's interpreter (session_create), where earlier runs' variables and files are.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(false)},
				call: func(ctx context.Context, b Backend, in SessionRunInput) (api.Result, []mcp.Content, error) {
					return runResult(ctx, b)(b.RunInSession(ctx, in.SessionID, in.RunRequest))
				},
			})
		},
		func() error {
			return add(srv, s, tool[empty, api.SessionList]{
				name: "session_list", title: "List sessions", op: "listSessions", scopes: scopeSessions,
				ann: mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, _ empty) (api.SessionList, []mcp.Content, error) {
					list, err := b.ListSessions(ctx)
					if list == nil {
						list = []api.Session{}
					}
					return api.SessionList{Sessions: list}, nil, err
				},
			})
		},
		func() error {
			return add(srv, s, tool[SessionRef, SessionClosed]{
				name: "session_close", title: "Close a session", op: "closeSession", scopes: scopeSessions,
				ann: mcp.ToolAnnotations{DestructiveHint: ptr(true)},
				call: func(ctx context.Context, b Backend, in SessionRef) (SessionClosed, []mcp.Content, error) {
					if err := b.CloseSession(ctx, in.SessionID); err != nil {
						return SessionClosed{}, nil, err
					}
					return SessionClosed{SessionID: in.SessionID, Closed: true}, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[SessionRef, api.StepList]{
				name: "session_steps", title: "List a session's steps", op: "listSteps", scopes: scopeSessions,
				lead: "Lists a session's steps: each session_run is one, with its code, output and whether its state is kept. Steps form a tree (parent); head is the step the session is at. Go back with session_rewind, branch off with session_fork.",
				ann:  mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, in SessionRef) (api.StepList, []mcp.Content, error) {
					l, err := b.Steps(ctx, in.SessionID)
					if err != nil {
						return api.StepList{}, nil, err
					}
					return *l, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[StepRef, api.Session]{
				name: "session_rewind", title: "Rewind a session to a step", op: "rewindSession", scopes: scopeSessions,
				lead: "Makes a session's variables and files those of one of its steps (session_steps); the next session_run goes on from there, as a new branch.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(true)},
				call: func(ctx context.Context, b Backend, in StepRef) (api.Session, []mcp.Content, error) {
					return sessionOf(b.Rewind(ctx, in.SessionID, in.Step))
				},
			})
		},
		func() error {
			return add(srv, s, tool[StepRef, api.Session]{
				name: "session_fork", title: "Fork a session at a step", op: "forkSession", scopes: scopeSessions,
				lead: "Starts a new session from one of a session's steps: it has that step's variables and files, and it and the original go on independently. Close it with session_close.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(false)},
				call: func(ctx context.Context, b Backend, in StepRef) (api.Session, []mcp.Content, error) {
					return sessionOf(b.Fork(ctx, in.SessionID, in.Step))
				},
			})
		},
		func() error {
			return add(srv, s, tool[SessionRef, api.Session]{
				name: "session_pause", title: "Pause a session", op: "pauseSession", scopes: scopeSessions,
				lead: "Writes a session's state to disk and frees its sandbox; its next session_run (or session_resume) brings it back with its variables and files.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(false)},
				call: func(ctx context.Context, b Backend, in SessionRef) (api.Session, []mcp.Content, error) {
					return sessionOf(b.Pause(ctx, in.SessionID))
				},
			})
		},
		func() error {
			return add(srv, s, tool[SessionRef, api.Session]{
				name: "session_resume", title: "Resume a paused session", op: "resumeSession", scopes: scopeSessions,
				ann: mcp.ToolAnnotations{DestructiveHint: ptr(false)},
				call: func(ctx context.Context, b Backend, in SessionRef) (api.Session, []mcp.Content, error) {
					return sessionOf(b.Resume(ctx, in.SessionID))
				},
			})
		},
		func() error {
			return add(srv, s, tool[StepInspectInput, api.StepInspection]{
				name: "step_inspect", title: "Inspect a step's variables and files", op: "inspectStep", scopes: scopeSessions,
				lead: "Describes the variables (type, size, a short repr; DataFrames as shape, dtypes and first rows) and files a session's step held, read in a throwaway copy: the session is not touched. The variables are the main code context's, or those of the context named in context (a session_run's context).",
				ann:  mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, in StepInspectInput) (api.StepInspection, []mcp.Content, error) {
					r, err := b.InspectStepIn(ctx, in.SessionID, in.Step, in.Context)
					if err != nil {
						return api.StepInspection{}, nil, err
					}
					return *r, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[StepDiffInput, api.StepDiff]{
				name: "step_diff", title: "What changed at a step", op: "diffSteps", scopes: scopeSessions,
				lead: "Lists the variables and files added, changed and removed from one step to another (by default from the step's parent), read in throwaway copies: the session is not touched. The variables are the main code context's, or those of the context named in context.",
				ann:  mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, in StepDiffInput) (api.StepDiff, []mcp.Content, error) {
					d, err := b.DiffStepsIn(ctx, in.SessionID, in.Step, in.Base, in.Context)
					if err != nil {
						return api.StepDiff{}, nil, err
					}
					return *d, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[FileWriteInput, FileWritten]{
				name: "file_write", title: "Write a file into a session", op: "writeFile", scopes: scopeFiles,
				lead: "Give the content as text, or as base64 in content for bytes that are not text.",
				ann:  mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
				call: func(ctx context.Context, b Backend, in FileWriteInput) (FileWritten, []mcp.Content, error) {
					data := in.Content
					if in.Text != "" {
						if len(in.Content) > 0 {
							return FileWritten{}, nil, sandbox.Errorf(sandbox.KindInvalidRequest, "both text and content are given").
								WithHint("give the file's content once: as text, or as base64 in content")
						}
						data = []byte(in.Text)
					}
					if err := b.WriteFile(ctx, in.SessionID, in.Path, data); err != nil {
						return FileWritten{}, nil, err
					}
					return FileWritten{SessionID: in.SessionID, Path: absPath(in.Path), Size: int64(len(data))}, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[FileRef, api.OutputFile]{
				name: "file_read", title: "Read a file of a session", op: "readFile", scopes: scopeFiles,
				lead: "Text comes back as text, an image as an image; the structured content has the bytes in base64.",
				ann:  mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, in FileRef) (api.OutputFile, []mcp.Content, error) {
					data, err := b.ReadFile(ctx, in.SessionID, in.Path)
					if err != nil {
						return api.OutputFile{}, nil, err
					}
					if data == nil {
						data = []byte{}
					}
					p := absPath(in.Path)
					return api.OutputFile{Path: p, Content: data, Size: int64(len(data))}, fileContent(p, data), nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[FileListInput, api.FileList]{
				name: "file_list", title: "List a session's files", op: "listFiles", scopes: scopeFiles,
				ann: mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, in FileListInput) (api.FileList, []mcp.Content, error) {
					list, err := b.ListFiles(ctx, in.SessionID, in.Path)
					if list == nil {
						list = []api.FileInfo{}
					}
					return api.FileList{Files: list}, nil, err
				},
			})
		},
		func() error {
			return add(srv, s, tool[empty, api.ImageList]{
				name: "image_list", title: "List the heavy images", op: "listImages", scopes: scopeRunOrSessions,
				lead: "The heavy tier's images and the Python packages each has: name packages in run_code or session_create to run in one.",
				ann:  mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, _ empty) (api.ImageList, []mcp.Content, error) {
					list, err := b.Images(ctx)
					if list == nil {
						list = []api.Image{}
					}
					return api.ImageList{Images: list}, nil, err
				},
			})
		},
		func() error {
			return add(srv, s, tool[IntentSetInput, api.Intent]{
				name: "egress_intent_set", title: "Set a session's egress intent", op: "setIntent", scopes: scopeIntent,
				ann: mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
				call: func(ctx context.Context, b Backend, in IntentSetInput) (api.Intent, []mcp.Content, error) {
					it, err := b.SetIntent(ctx, in.SessionID, in.Name, in.TTL)
					if err != nil {
						return api.Intent{}, nil, err
					}
					return *it, nil, nil
				},
			})
		},
		func() error {
			return add(srv, s, tool[SessionRef, api.Intent]{
				name: "egress_intent_clear", title: "Clear a session's egress intent", op: "clearIntent", scopes: scopeIntent,
				ann: mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
				call: func(ctx context.Context, b Backend, in SessionRef) (api.Intent, []mcp.Content, error) {
					return api.Intent{}, nil, b.ClearIntent(ctx, in.SessionID)
				},
			})
		},
		func() error {
			return add(srv, s, tool[AuditQuery, AuditRecords]{
				name: "audit_query", title: "Query the audit log", op: "queryAudit", scopes: scopeAuditRead,
				ann: mcp.ToolAnnotations{ReadOnlyHint: true},
				call: func(ctx context.Context, b Backend, in AuditQuery) (AuditRecords, []mcp.Content, error) {
					f := AuditFilter{Session: in.Session, Kind: in.Kind, Decision: in.Decision, Tenant: in.Tenant,
						Agent: in.Agent, Since: in.Since, Until: in.Until, Limit: in.Limit}
					if f.Limit == 0 {
						f.Limit = auditDefaultLimit
					}
					if f.Limit < 1 || f.Limit > auditMaxLimit {
						return AuditRecords{}, nil, sandbox.Errorf(sandbox.KindInvalidRequest, "limit %d is not a number from 1 to %d", in.Limit, auditMaxLimit).
							WithHint("page back in time with until set to the oldest record's time")
					}
					recs, err := b.Audit(ctx, f)
					if recs == nil {
						recs = []api.AuditRecord{}
					}
					return AuditRecords{Records: recs}, nil, err
				},
			})
		},
	} {
		if err := add(); err != nil {
			return err
		}
	}
	return nil
}

// runResult finishes a run tool: the result as structured content, and as content for a model.
func runResult(ctx context.Context, b Backend) func(*api.Result, error) (api.Result, []mcp.Content, error) {
	return func(r *api.Result, err error) (api.Result, []mcp.Content, error) {
		if err != nil {
			return api.Result{}, nil, err
		}
		return *r, runContent(ctx, b, r), nil
	}
}

// absPath is where a path of the files API lands: absolute, or relative to the sandbox's working
// directory.
func absPath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(sandbox.WorkDir, p)
}

// sessionOf answers a tool whose operation returns a session.
func sessionOf(s *api.Session, err error) (api.Session, []mcp.Content, error) {
	if err != nil {
		return api.Session{}, nil, err
	}
	return *s, nil, nil
}
