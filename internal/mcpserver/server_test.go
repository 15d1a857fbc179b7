package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/mcpserver"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

const adminKey = "test-admin-key-0123456789"

// figure is a small real PNG, as a run that drew with matplotlib returns.
func figure(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 3))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// answer is the fake tier's behaviour, chosen by the code it gets:
//
//	draw     prints "drew", makes a PNG figure and displays a DataFrame-like value
//	raise    raises ZeroDivisionError (a result, not an error)
//	timeout  a timeout error with partial output
//	crash    an internal error whose text must not reach the client
//	x=V / print(x)  in a session: state that survives between runs
//	else     echoes the code
func answer(png []byte) runtimetest.Answer {
	return func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		switch code := req.Code; {
		case code == "draw":
			return &sandbox.Result{Stdout: "drew\n",
				Artifacts: []sandbox.Artifact{{Name: "figure-1.png", MIME: "image/png", Content: png}},
				Outputs:   []sandbox.Output{{Text: "   a\n0  1", HTML: "<table><tr><td>1</td></tr></table>"}}}, nil
		case code == "raise":
			tb := "Traceback (most recent call last):\nZeroDivisionError: division by zero\n"
			return &sandbox.Result{Stderr: tb, ExitCode: 1, Error: &sandbox.PyError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: tb}}, nil
		case code == "timeout":
			return nil, &sandbox.Error{Kind: sandbox.KindTimeout, Message: "the code ran past its timeout of 1 s",
				Hint: "raise timeout", Result: &sandbox.Result{Stdout: "partial\n"}}
		case code == "crash":
			return nil, errors.New("worker 3 crashed reading /var/secret/worker.sock")
		case s != nil && strings.HasPrefix(code, "print("):
			for _, c := range slices.Backward(s.Codes()) {
				if v, ok := strings.CutPrefix(c, "x="); ok {
					return &sandbox.Result{Stdout: v + "\n"}, nil
				}
			}
		}
		return &sandbox.Result{Stdout: req.Code}, nil
	}
}

// fixture is the MCP front door over a Manager of one fake tier, behind the bootstrap key and a
// key file.
type fixture struct {
	url      string
	keysFile string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	rt := runtimetest.NewFake(sandbox.Capabilities{Tier: "nano", Sessions: true, SessionFiles: true, Contained: true})
	rt.Answer = answer(figure(t))
	store, err := artifacts.Open(t.TempDir(), artifacts.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, Artifacts: store, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	path := filepath.Join(t.TempDir(), auth.KeysFile)
	keys, err := auth.NewKeys(adminKey, path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcpserver.NewHandler(mcpserver.HTTPOptions{Engine: sandbox.WithAudit(m, nil), Keys: keys, Options: mcpserver.Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &fixture{url: hs.URL, keysFile: path}
}

// key makes a tenant key with scopes.
func (f *fixture) key(t *testing.T, tenant string, scopes ...auth.Scope) string {
	t.Helper()
	k, _, err := auth.CreateKey(f.keysFile, tenant, "", scopes, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// bearer adds the API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connect returns an MCP client session of the official SDK over streamable HTTP with key, at the
// protocol version given ("" for the newest).
func connect(t testing.TB, url, key, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agentbox-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// decode reads a successful call's structured content into out.
func decode(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	var s []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

// toolError reads a tool error's body: the API's error body.
func toolError(t *testing.T, res *mcp.CallToolResult) api.ErrorResponse {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %s", text(res))
	}
	var body api.ErrorResponse
	if err := json.Unmarshal([]byte(text(res)), &body); err != nil {
		t.Fatalf("error text %q: %v", text(res), err)
	}
	return body
}

var allTools = []string{"audit_query", "egress_intent_clear", "egress_intent_set", "file_list", "file_read", "file_write",
	"image_list", "run_code", "session_close", "session_create", "session_fork", "session_list", "session_pause",
	"session_resume", "session_rewind", "session_run", "session_steps", "step_diff", "step_inspect"}

// Every tool is listed with input and output schemas inferred from the API's types, every field
// described (by the contract), and the tool described by its operation.
func TestMCPToolsList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, version := range []string{"", "2025-06-18", "2025-03-26"} {
		cs := connect(t, f.url, adminKey, version)
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		var names []string
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, allTools) {
			t.Fatalf("%s: tools %v, want %v", version, names, allTools)
		}
	}
	cs := connect(t, f.url, adminKey, "")
	list, _ := cs.ListTools(context.Background(), nil)
	for _, tl := range list.Tools {
		if tl.Description == "" || tl.Title == "" || tl.OutputSchema == nil {
			t.Errorf("%s: description %q title %q output schema %v", tl.Name, tl.Description, tl.Title, tl.OutputSchema)
		}
		b, _ := json.Marshal(tl.InputSchema)
		var in jsonschema.Schema
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatalf("%s input schema: %v", tl.Name, err)
		}
		for path, p := range undescribed(&in, "") {
			if !slices.Contains(contractGaps[tl.Name], path) {
				t.Errorf("%s: input property %s (%v) has no description", tl.Name, path, p.Type)
			}
		}
	}
	run := find(list.Tools, "run_code")
	if !strings.Contains(run.Description, "Run code once in a fresh sandbox.") {
		t.Errorf("run_code's description is not its operation's: %q", run.Description)
	}
	b, _ := json.Marshal(run.InputSchema)
	for _, want := range []string{`"required":["code"]`, `"enum":["auto","nano","heavy"]`, `"contentEncoding":"base64"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run_code's input schema lacks %s: %s", want, b)
		}
	}
	b, _ = json.Marshal(find(list.Tools, "session_run").InputSchema)
	if !strings.Contains(string(b), `"required":["session_id","code"]`) {
		t.Errorf("session_run's input schema: %s", b)
	}
}

// contractGaps are input fields api/openapi.yaml does not describe (CreateSessionRequest's
// limits and env); they say what they are in the RunRequest the session's runs take.
var contractGaps = map[string][]string{
	"session_create": {".memory_mb", ".stdout_limit", ".stderr_limit", ".files_limit", ".env"},
}

func find(tools []*mcp.Tool, name string) *mcp.Tool {
	for _, t := range tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// undescribed returns the properties of s, at any depth, that have no description.
func undescribed(s *jsonschema.Schema, at string) map[string]*jsonschema.Schema {
	out := map[string]*jsonschema.Schema{}
	if s == nil {
		return out
	}
	for name, p := range s.Properties {
		path := at + "." + name
		if p.Description == "" {
			out[path] = p
		}
		for k, v := range undescribed(p, path) {
			out[k] = v
		}
	}
	for k, v := range undescribed(s.Items, at+"[]") {
		out[k] = v
	}
	return out
}

func TestMCPRunCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := connect(t, f.url, adminKey, "")

	t.Run("Figure", func(t *testing.T) {
		res := call(t, cs, "run_code", map[string]any{"code": "draw"})
		var r api.Result
		decode(t, res, &r)
		if r.Stdout != "drew\n" || r.Runtime != "nano" || len(r.Artifacts) != 1 || len(r.Outputs) != 1 {
			t.Fatalf("structured content %+v", r)
		}
		var img *mcp.ImageContent
		var html *mcp.EmbeddedResource
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				img = c
			case *mcp.EmbeddedResource:
				html = c
			}
		}
		if img == nil || img.MIMEType != "image/png" || !bytes.Equal(img.Data, figure(t)) {
			t.Errorf("the figure is not image content: %+v", res.Content)
		}
		if html == nil || html.Resource.MIMEType != "text/html" || !strings.Contains(html.Resource.Text, "<table>") {
			t.Errorf("the displayed value is not HTML: %+v", res.Content)
		}
		if s := text(res); !strings.Contains(s, "stdout:\ndrew\n") || !strings.Contains(s, "   a\n0  1") || !strings.Contains(s, "runtime nano") {
			t.Errorf("text content %q", s)
		}
	})

	t.Run("Exception", func(t *testing.T) {
		res := call(t, cs, "run_code", map[string]any{"code": "raise"})
		var r api.Result
		decode(t, res, &r)
		if r.ExitCode != 1 || r.Error == nil || r.Error.Name != "ZeroDivisionError" {
			t.Fatalf("got %+v", r)
		}
		if !strings.Contains(text(res), "error: ZeroDivisionError: division by zero") {
			t.Errorf("text %q", text(res))
		}
	})

	t.Run("TimeoutIsAToolError", func(t *testing.T) {
		body := toolError(t, call(t, cs, "run_code", map[string]any{"code": "timeout"}))
		if body.Error.Code != api.CodeTimeout || body.Error.Hint != "raise timeout" || body.Result == nil || body.Result.Stdout != "partial\n" {
			t.Errorf("got %+v", body)
		}
	})

	t.Run("InternalErrorHidden", func(t *testing.T) {
		res := call(t, cs, "run_code", map[string]any{"code": "crash"})
		body := toolError(t, res)
		if body.Error.Code != api.CodeInternal || strings.Contains(text(res), "secret") || !strings.Contains(body.Error.Message, "call id") {
			t.Errorf("got %s", text(res))
		}
	})

	t.Run("BadArguments", func(t *testing.T) {
		for name, args := range map[string]any{
			"missing code":  map[string]any{},
			"unknown field": map[string]any{"code": "1", "cod": "2"},
			"wrong type":    map[string]any{"code": 1},
			"bad runtime":   map[string]any{"code": "1", "runtime": "turbo"},
			"bad base64":    map[string]any{"code": "1", "files": []any{map[string]any{"path": "a", "content": "%%%"}}},
		} {
			body := toolError(t, call(t, cs, "run_code", args))
			if body.Error.Code != api.CodeInvalidRequest || body.Error.Hint == "" {
				t.Errorf("%s: %+v", name, body)
			}
		}
	})

	t.Run("InputFiles", func(t *testing.T) {
		res := call(t, cs, "run_code", map[string]any{"code": "1", "memory_mb": 1 << 40})
		if body := toolError(t, res); body.Error.Code != api.CodeInvalidRequest || !strings.Contains(body.Error.Message, "memory") {
			t.Errorf("a limit above the maximum: %+v", body)
		}
	})
}

func TestMCPSessionsAndFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := connect(t, f.url, adminKey, "2025-06-18") // an older revision, negotiated

	var s api.Session
	decode(t, call(t, cs, "session_create", map[string]any{"runtime": "nano"}), &s)
	if s.ID == "" || s.Runtime != "nano" {
		t.Fatalf("session %+v", s)
	}
	var r api.Result
	decode(t, call(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "x=42"}), &r)
	decode(t, call(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "print(x)"}), &r)
	if r.Stdout != "42\n" {
		t.Errorf("state across runs: %q", r.Stdout)
	}
	if body := toolError(t, call(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "1", "memory_mb": 64})); body.Error.Code != api.CodeInvalidRequest ||
		!strings.Contains(body.Error.Message, "memory_mb cannot change within a session") {
		t.Errorf("a session run that sets memory: %+v", body)
	}

	var w mcpserver.FileWritten
	decode(t, call(t, cs, "file_write", map[string]any{"session_id": s.ID, "path": "data/a.txt", "text": "hello"}), &w)
	if w.Path != "/home/user/data/a.txt" || w.Size != 5 {
		t.Errorf("written %+v", w)
	}
	decode(t, call(t, cs, "file_write", map[string]any{"session_id": s.ID, "path": "b.bin", "content": "AAEC"}), &w)
	if body := toolError(t, call(t, cs, "file_write", map[string]any{"session_id": s.ID, "path": "c", "text": "x", "content": "AAEC"})); body.Error.Code != api.CodeInvalidRequest {
		t.Errorf("text and content: %+v", body)
	}
	res := call(t, cs, "file_read", map[string]any{"session_id": s.ID, "path": "/home/user/data/a.txt"})
	var of api.OutputFile
	decode(t, res, &of)
	if string(of.Content) != "hello" || of.Size != 5 || text(res) != "hello" {
		t.Errorf("read %+v, text %q", of, text(res))
	}
	res = call(t, cs, "file_read", map[string]any{"session_id": s.ID, "path": "b.bin"})
	decode(t, res, &of)
	if !bytes.Equal(of.Content, []byte{0, 1, 2}) || !strings.Contains(text(res), "not text") {
		t.Errorf("binary read %+v, text %q", of, text(res))
	}
	var fl api.FileList
	decode(t, call(t, cs, "file_list", map[string]any{"session_id": s.ID}), &fl)
	var paths []string
	for _, fi := range fl.Files {
		paths = append(paths, fi.Path)
	}
	if !slices.Contains(paths, "/home/user/data/a.txt") || !slices.Contains(paths, "/home/user/b.bin") {
		t.Errorf("listed %v", paths)
	}
	if body := toolError(t, call(t, cs, "file_read", map[string]any{"session_id": s.ID, "path": "nope"})); body.Error.Code != api.CodeNotFound {
		t.Errorf("a missing file: %+v", body)
	}

	var sl api.SessionList
	decode(t, call(t, cs, "session_list", nil), &sl)
	if len(sl.Sessions) != 1 || sl.Sessions[0].ID != s.ID {
		t.Errorf("sessions %+v", sl)
	}
	var il api.ImageList
	decode(t, call(t, cs, "image_list", nil), &il)
	if il.Images == nil {
		t.Errorf("images %+v", il)
	}

	var closed mcpserver.SessionClosed
	decode(t, call(t, cs, "session_close", map[string]any{"session_id": s.ID}), &closed)
	if !closed.Closed || closed.SessionID != s.ID {
		t.Errorf("closed %+v", closed)
	}
	body := toolError(t, call(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "1"}))
	if body.Error.Code != api.CodeNotFound || !strings.Contains(body.Error.Hint, "session_list") {
		t.Errorf("a closed session: %+v", body)
	}
}

// A tenant's key reaches its own sessions only; a key without a tool's scope gets a tool error
// naming it; a wrong key gets 401 before any MCP.
func TestMCPKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := connect(t, f.url, f.key(t, "acme", auth.ScopeSessions, auth.ScopeFiles), "")
	beta := connect(t, f.url, f.key(t, "beta", auth.ScopeSessions), "")
	var s api.Session
	decode(t, call(t, acme, "session_create", nil), &s)

	var sl api.SessionList
	decode(t, call(t, beta, "session_list", nil), &sl)
	if len(sl.Sessions) != 0 {
		t.Errorf("beta lists acme's sessions: %+v", sl)
	}
	for tool, args := range map[string]map[string]any{
		"session_run":   {"session_id": s.ID, "code": "1"},
		"session_close": {"session_id": s.ID},
	} {
		if body := toolError(t, call(t, beta, tool, args)); body.Error.Code != api.CodeNotFound {
			t.Errorf("beta's %s on acme's session: %+v", tool, body)
		}
	}
	decode(t, call(t, acme, "session_list", nil), &sl)
	if len(sl.Sessions) != 1 {
		t.Errorf("acme's sessions: %+v", sl)
	}

	body := toolError(t, call(t, beta, "run_code", map[string]any{"code": "1"}))
	if body.Error.Code != api.CodeForbidden || !strings.Contains(body.Error.Message, "run scope") || !strings.Contains(body.Error.Message, "run_code") {
		t.Errorf("a key without the run scope: %+v", body)
	}
	body = toolError(t, call(t, beta, "file_list", map[string]any{"session_id": s.ID}))
	if body.Error.Code != api.CodeForbidden || !strings.Contains(body.Error.Message, "files scope") {
		t.Errorf("a key without the files scope: %+v", body)
	}

	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer wrong")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil || resp.StatusCode != 401 || eb.Error.Code != api.CodeUnauthorized ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("a wrong key: %d %+v %v", resp.StatusCode, eb, err)
	}
}

// BenchmarkMCPRunCode is one run_code call over streamable HTTP with the SDK's client, against a
// fake tier: what the MCP front door costs per call (auth, the SDK's session per request, schema
// checks, content), without the run.
func BenchmarkMCPRunCode(b *testing.B) {
	f := newFixture(b)
	cs := connect(b, f.url, adminKey, "")
	args := map[string]any{"code": "print(1)"}
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_code", Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
