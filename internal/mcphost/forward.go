package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/apiwire"

	"github.com/agentbox-dev/agentbox/internal/dlp"
	"github.com/agentbox-dev/agentbox/internal/promptscan"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// What a hosted server offers besides tools (resources, resource templates, prompts, argument
// completion) is carried through /mcp/servers/NAME by forwarding each request to the server's
// client session, governed like a tool call: a server whose tool definitions are refused
// (pinning) answers nothing else either; what the caller sends (a resource's URI, a prompt's
// arguments) passes DLP with the default actions and is blocked before the server sees it;
// everything the server answers passes DLP with every finding redacted, and the text a model
// will read (a resource's contents, a prompt's messages, the descriptions of lists) is scanned
// for hidden instructions. Reading a resource and getting a prompt are audit records (mcp.read,
// mcp.prompt); a list is one only when something in it was redacted or flagged (mcp.list).
//
// Subscriptions are carried by the gateway's sessions (sessions.go): resources/subscribe passes
// the same DLP check as a URI read, and the updates pass DLP redaction on their way back.

// Forwarded methods.
const (
	methodResourcesList     = "resources/list"
	methodResourceTemplates = "resources/templates/list"
	methodResourcesRead     = "resources/read"
	methodPromptsList       = "prompts/list"
	methodPromptsGet        = "prompts/get"
	methodComplete          = "completion/complete"
)

// capabilitiesOf are the capabilities /mcp/servers/NAME advertises: the hosted server's, its
// list-changed notifications relayed (listchanged.go).
func capabilitiesOf(cs *mcp.ClientSession) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if cs == nil || cs.InitializeResult() == nil || cs.InitializeResult().Capabilities == nil {
		return caps
	}
	hc := cs.InitializeResult().Capabilities
	if hc.Tools != nil {
		caps.Tools.ListChanged = hc.Tools.ListChanged
	}
	if hc.Resources != nil {
		caps.Resources = &mcp.ResourceCapabilities{Subscribe: hc.Resources.Subscribe, ListChanged: hc.Resources.ListChanged}
	}
	if hc.Prompts != nil {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: hc.Prompts.ListChanged}
	}
	if hc.Completions != nil {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
	if hc.Logging != nil {
		caps.Logging = &mcp.LoggingCapabilities{}
	}
	return caps
}

// session is a server's client session for a request that is not a tool call: started if it is
// not running, refused while its definitions are.
func (m *Manager) session(ctx context.Context, name string) (*host, *mcp.ClientSession, error) {
	h, _, err := m.hostOf(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUsed = time.Now()
	if len(h.refused) > 0 {
		return nil, nil, refusedErr(name, h.refused)
	}
	return h, h.session, nil
}

// forward answers one of the forwarded methods for server name; ok is false for other methods.
func (m *Manager) forward(ctx context.Context, name, method string, req mcp.Request) (res mcp.Result, ok bool, err error) {
	switch method {
	case methodResourcesList, methodResourceTemplates, methodResourcesRead, methodPromptsList, methodPromptsGet, methodComplete:
	default:
		return nil, false, nil
	}
	start := time.Now()
	rec := Record{Server: name}
	audited := false
	done := func(decision, reason string) {
		rec.Decision, rec.Reason = decision, reason
		rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		if audited || len(rec.Findings) > 0 || len(rec.Flagged) > 0 || decision != "allow" && decision != "redact" {
			if rec.Kind == "" {
				rec.Kind = "mcp.list"
				rec.Tool = method
			}
			m.record(ctx, rec)
		}
	}
	// The caller's part: what reaches the server.
	var sent any
	switch r := req.(type) {
	case *mcp.ReadResourceRequest:
		audited, rec.Kind = true, "mcp.read"
		if r.Params != nil {
			rec.Tool, sent = r.Params.URI, r.Params
		}
	case *mcp.GetPromptRequest:
		audited, rec.Kind = true, "mcp.prompt"
		if r.Params != nil {
			rec.Tool, sent = r.Params.Name, r.Params
		}
	case *mcp.CompleteRequest:
		sent = r.Params
	}
	if sent != nil {
		b, _ := json.Marshal(sent)
		rec.ArgsSHA256 = digest(b)
		red, _ := m.results.RedactText("arguments", b)
		rec.ArgsExcerpt = excerpt(red, 512)
		v, _, _ := m.scanArgs(m.policyOf(ctx, name), "arguments", b)
		rec.Findings = append(rec.Findings, findings(v, "arguments")...)
		// A URI or a prompt's argument redacted would be another request: whatever DLP would act
		// on (block or redact) stops it.
		if v.Action == dlp.ActionBlock || v.Action == dlp.ActionRedact {
			reason := "blocked before reaching the server: " + strings.TrimPrefix(v.Reason, "blocked: ")
			done("block", reason)
			m.violationOf(ctx, name, rec.Tool, "block", reason)
			return nil, true, sandbox.Errorf(sandbox.KindPolicyViolation, "%s", reason)
		}
	}
	h, cs, err := m.session(ctx, name)
	if err != nil {
		done("error", err.Error())
		return nil, true, err
	}
	switch r := req.(type) {
	case *mcp.ListResourcesRequest:
		res, err = cs.ListResources(ctx, r.Params)
	case *mcp.ListResourceTemplatesRequest:
		res, err = cs.ListResourceTemplates(ctx, r.Params)
	case *mcp.ReadResourceRequest:
		res, err = cs.ReadResource(ctx, r.Params)
	case *mcp.ListPromptsRequest:
		res, err = cs.ListPrompts(ctx, r.Params)
	case *mcp.GetPromptRequest:
		res, err = cs.GetPrompt(ctx, r.Params)
	case *mcp.CompleteRequest:
		res, err = cs.Complete(ctx, r.Params)
	default:
		return nil, false, nil
	}
	if err != nil {
		if m.ended(h, err) {
			e := sandbox.Errorf(sandbox.KindRuntimeUnavailable, "hosted MCP server %s ended during the request (%v); it is started again on the next one", name, err)
			done("error", e.Error())
			return nil, true, e
		}
		// The server's own protocol error (an unknown resource, a missing argument) goes back
		// as it is: it is the server's answer.
		done("error", err.Error())
		return nil, true, err
	}
	out, _ := json.Marshal(res)
	rec.ResultSHA256 = digest(out)
	decision := "allow"
	rv, rred := m.results.ScanContent("result", "application/json", out)
	rec.Findings = append(rec.Findings, findings(rv, "result")...)
	switch {
	case rv.Action == dlp.ActionBlock:
		reason := "the result was withheld: " + rv.Reason
		done("block", reason)
		return nil, true, sandbox.Errorf(sandbox.KindPolicyViolation, "%s", reason)
	case rv.Action == dlp.ActionRedact && rred != nil:
		if r2, err := sameType(res, rred); err == nil {
			res, out, decision = r2, rred, "redact"
		}
	}
	rec.ResultExcerpt = excerpt(out, 512)
	if pr := promptscan.ScanText(modelText(res)); pr.Flagged() {
		rec.Flagged = pr.Rules()
		// A resource's contents or a prompt's messages are what a model reads, as a tool's
		// result is: withheld under a profile whose mcp.prompt_scan is block (lists are flagged).
		if s, ok := m.Get(name); ok && audited {
			if pol, err := m.policy(ctx, s); err == nil && pol.blockPrompts {
				reason := fmt.Sprintf("blocked: the answer of hosted MCP server %s to %s was withheld: it holds what looks like instructions to the model (%s), and the egress profile's mcp.prompt_scan is block",
					name, method, strings.Join(rec.Flagged, ", "))
				rec.ResultExcerpt = ""
				done("block", reason)
				m.violation(pol, name, rec.Tool, "block", reason)
				return nil, true, sandbox.Errorf(sandbox.KindPolicyViolation, "%s", reason)
			}
		}
	}
	done(decision, rv.Reason)
	return res, true, nil
}

// ended says whether err means the server's process ended (stopping the host so that the next
// request starts it again).
func (m *Manager) ended(h *host, err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	dead := h.proc != nil && h.proc.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF)
	if dead {
		h.stopLocked()
	}
	return dead
}

// sameType decodes b into a new value of res's type.
func sameType(res mcp.Result, b []byte) (mcp.Result, error) {
	var out mcp.Result
	switch res.(type) {
	case *mcp.ListResourcesResult:
		out = new(mcp.ListResourcesResult)
	case *mcp.ListResourceTemplatesResult:
		out = new(mcp.ListResourceTemplatesResult)
	case *mcp.ReadResourceResult:
		out = new(mcp.ReadResourceResult)
	case *mcp.ListPromptsResult:
		out = new(mcp.ListPromptsResult)
	case *mcp.GetPromptResult:
		out = new(mcp.GetPromptResult)
	case *mcp.CompleteResult:
		out = new(mcp.CompleteResult)
	default:
		return nil, fmt.Errorf("mcphost: no redaction for %T", res)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// modelText is the text of a result a model will read: descriptions, a resource's text, a
// prompt's messages.
func modelText(res mcp.Result) []byte {
	var b strings.Builder
	add := func(s ...string) {
		for _, x := range s {
			if x != "" {
				b.WriteString(x)
				b.WriteByte('\n')
			}
		}
	}
	content := func(c mcp.Content) {
		switch c := c.(type) {
		case *mcp.TextContent:
			add(c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				add(c.Resource.Text)
			}
		}
	}
	switch r := res.(type) {
	case *mcp.ListResourcesResult:
		for _, x := range r.Resources {
			add(x.Name, x.Title, x.Description)
		}
	case *mcp.ListResourceTemplatesResult:
		for _, x := range r.ResourceTemplates {
			add(x.Name, x.Title, x.Description)
		}
	case *mcp.ReadResourceResult:
		for _, x := range r.Contents {
			add(x.Text)
		}
	case *mcp.ListPromptsResult:
		for _, x := range r.Prompts {
			add(x.Name, x.Title, x.Description)
			for _, a := range x.Arguments {
				add(a.Description)
			}
		}
	case *mcp.GetPromptResult:
		add(r.Description)
		for _, msg := range r.Messages {
			content(msg.Content)
		}
	}
	return []byte(b.String())
}

// protocolError is err as the JSON-RPC error /mcp/servers/NAME answers: the server's own errors
// as they are, the gateway's (a refusal, a block, a server that ended) with the API's error body
// (code, message, hint) as data.
func protocolError(err error) error {
	var se *sandbox.Error
	var we *jsonrpc.Error
	if !errors.As(err, &se) && errors.As(err, &we) {
		return we // as the server said it, without the client's wrapping
	}
	_, body := apiwire.ErrorResponse(err)
	data, _ := json.Marshal(body)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error(), Data: data}
}

// remoteErr is a remote server that could not be reached or answered: the egress gateway's
// refusal as it is (policy_violation, with the gateway's words), anything else unavailable.
func remoteErr(s Server, what string, err error) error {
	var se *sandbox.Error
	if errors.As(err, &se) {
		return se // the gateway's refusal, without the client's wrapping
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "remote MCP server %s (%s) %s: %v", s.Name, s.URL, what, err)
}
