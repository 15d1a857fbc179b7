package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// tool is one operation of the API as an MCP tool: In and Out are its input and output types,
// from which its schemas are inferred.
type tool[In, Out any] struct {
	name  string
	title string
	// op is the contract's operationId: the tool's description is the operation's, and fields
	// without a description of their own take its parameters'.
	op string
	// lead, when set, comes before the operation's description: what the tool adds to it.
	lead string
	// scopes are the key scopes that may call the tool (any one of them): those of its route.
	scopes []auth.Scope
	ann    mcp.ToolAnnotations
	// call does the work. content, when not empty, is what a model reads instead of the
	// structured content's JSON.
	call func(ctx context.Context, b Backend, in In) (out Out, content []mcp.Content, err error)
}

// access returns the Backend a call of tool goes to, once the caller may call a tool that needs
// one of scopes; or the error that says why not.
type access func(ctx context.Context, tool string, scopes []auth.Scope) (Backend, error)

// server holds what every tool call shares.
type server struct {
	c      *contract
	access access
	log    *slog.Logger
	// showInternal shows internal errors' text to the client.
	showInternal bool
}

// add registers t on srv with schemas inferred from In and Out and described by the contract.
func add[In, Out any](srv *mcp.Server, s *server, t tool[In, Out]) error {
	op, err := s.c.operation(t.op)
	if err != nil {
		return fmt.Errorf("tool %s: %w", t.name, err)
	}
	in, err := schemaFor[In](s.c, op, true)
	if err != nil {
		return fmt.Errorf("tool %s: input schema: %w", t.name, err)
	}
	out, err := schemaFor[Out](s.c, op, false)
	if err != nil {
		return fmt.Errorf("tool %s: output schema: %w", t.name, err)
	}
	inRes, err := in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return fmt.Errorf("tool %s: input schema: %w", t.name, err)
	}
	outRes, err := out.Resolve(nil)
	if err != nil {
		return fmt.Errorf("tool %s: output schema: %w", t.name, err)
	}
	desc := []string{}
	for _, p := range []string{t.lead, op.summary, op.description} {
		if p = strings.TrimSpace(p); p != "" {
			desc = append(desc, p)
		}
	}
	// The schemas go to the SDK as JSON: it reads the input schema again on every call (for
	// x-mcp-header annotations), and JSON is what it reads fastest (2.2 ms a call from a
	// *jsonschema.Schema, most of it marshalling the schema).
	inJSON, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("tool %s: input schema: %w", t.name, err)
	}
	outJSON, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("tool %s: output schema: %w", t.name, err)
	}
	ann := t.ann
	ann.Title = t.title
	srv.AddTool(&mcp.Tool{
		Name:         t.name,
		Title:        t.title,
		Description:  strings.Join(desc, "\n\n"),
		InputSchema:  json.RawMessage(inJSON),
		OutputSchema: json.RawMessage(outJSON),
		Annotations:  &ann,
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		res, code := handle(ctx, s, t, inRes, outRes, req.Params.Arguments)
		s.logCall(ctx, t.name, code, time.Since(start))
		return res, nil
	})
	return nil
}

// handle serves one call and returns its result and the API's error code ("" on success).
func handle[In, Out any](ctx context.Context, s *server, t tool[In, Out], inRes, outRes *jsonschema.Resolved, args json.RawMessage) (*mcp.CallToolResult, string) {
	b, err := s.access(ctx, t.name, t.scopes)
	if err != nil {
		return s.failure(ctx, t.name, err)
	}
	in, err := decodeInput[In](args, inRes)
	if err != nil {
		return s.failure(ctx, t.name, err)
	}
	out, content, err := t.call(ctx, b, in)
	if err != nil {
		return s.failure(ctx, t.name, err)
	}
	structured, err := json.Marshal(out)
	if err == nil {
		err = validateJSON(structured, outRes)
	}
	if err != nil {
		return s.failure(ctx, t.name, fmt.Errorf("tool %s: its answer does not match its output schema: %w", t.name, err))
	}
	if len(content) == 0 {
		content = []mcp.Content{&mcp.TextContent{Text: string(structured)}}
	}
	return &mcp.CallToolResult{Content: content, StructuredContent: json.RawMessage(structured)}, ""
}

// decodeInput checks a call's arguments against the input schema and decodes them. A failure is
// invalid_request saying what was wrong.
func decodeInput[In any](args json.RawMessage, rs *jsonschema.Resolved) (In, error) {
	var in In
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	if err := validateJSON(args, rs); err != nil {
		return in, sandbox.Errorf(sandbox.KindInvalidRequest, "arguments: %v", err).
			WithHint("the tool's inputSchema lists the arguments it takes and their types")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, sandbox.Errorf(sandbox.KindInvalidRequest, "arguments: %v", err).
			WithHint("the tool's inputSchema lists the arguments it takes and their types")
	}
	return in, nil
}

func validateJSON(b []byte, rs *jsonschema.Resolved) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// failure is a tool error (isError) whose text is the API's error body: its code, message and
// hint, and the partial result when a limit ended a run. An internal error is logged in full and,
// unless the server shows internal errors, reaches the client as its call id only.
func (s *server) failure(ctx context.Context, tool string, err error) (*mcp.CallToolResult, string) {
	body := errorBody(err)
	if body.Error.Code == api.CodeInternal {
		id := callID()
		s.log.LogAttrs(ctx, slog.LevelError, "mcp: internal error", slog.String("tool", tool),
			slog.String("call_id", id), slog.Any("err", err))
		if !s.showInternal {
			body.Error.Message = fmt.Sprintf("internal error (call id %s)", id)
			body.Error.Hint = "this is a fault in the daemon, not in the call; its log has the details under this call id"
		}
	}
	b, _ := json.Marshal(body)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, body.Error.Code
}

// errorBody is the API's error body for err: a daemon's own answer as it came, anything else as
// apiwire says (kind → code, hint).
func errorBody(err error) api.ErrorResponse {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Body
	}
	_, body := apiwire.ErrorResponse(err)
	return body
}

func callID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logCall writes one line per call: who called which tool, how it ended, how long it took.
func (s *server) logCall(ctx context.Context, tool, code string, d time.Duration) {
	attrs := []slog.Attr{slog.String("tool", tool), slog.Float64("ms", apiwire.Millis(d))}
	if id, ok := auth.IdentityOf(ctx); ok {
		attrs = append(attrs, slog.String("tenant", id.Tenant), slog.String("key", id.KeyID))
	}
	level := slog.LevelInfo
	if code != "" {
		attrs = append(attrs, slog.String("code", code))
		if code == api.CodeInternal {
			level = slog.LevelError
		}
	}
	s.log.LogAttrs(ctx, level, "mcp tool call", attrs...)
}
