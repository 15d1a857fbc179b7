package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// mcpDaemon is the whole daemon (real jailed nano workers, heavy off unless edit turns it on, its
// real front doors on loopback) with a key file.
type mcpDaemon struct {
	url  string // the listener; /mcp and /v1 are under it
	keys string // the key file
	// keyless is a second loopback listener over the same front doors that adds the daemon's key
	// to requests that have none: for MCP clients that cannot send a header (the conformance
	// suite). Host headers pass as they came, so DNS-rebinding protection is what it is.
	keyless string
}

func startMCPDaemon(t *testing.T, edit func(*config.Config)) *mcpDaemon {
	t.Helper()
	testenv.RequireRoot(t)
	cfg := config.Default()
	cfg.Sessions.Dir = t.TempDir() // sessions that outlive the daemon: this test's own
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	stateDir := t.TempDir()
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled, h.StateDir = heavy.Off, stateDir }))
	cfg.ArtifactsDir, cfg.Audit.Dir = t.TempDir(), t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	keys := filepath.Join(t.TempDir(), auth.KeysFile)
	log := testLog(t)
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, KeysFile: keys, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(doors)
	keyless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		doors.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		keyless.Close()
		ts.Close()
		m.Close()
	})
	return &mcpDaemon{url: ts.URL, keys: keys, keyless: keyless.URL}
}

// tenantKey makes a key of tenant with scopes.
func (d *mcpDaemon) tenantKey(t *testing.T, tenant string, scopes ...auth.Scope) string {
	t.Helper()
	k, _, err := auth.CreateKey(d.keys, tenant, tenant+"-agent", scopes, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// bearer adds an API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the official Go SDK's client to the daemon's /mcp with key, at protocol
// version ("" for the newest, 2026-07-28).
func mcpSession(t *testing.T, url, key, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool; a successful call's structured content is decoded into out (if not nil),
// a tool error's body is returned.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args, out any) (*mcp.CallToolResult, *api.ErrorResponse) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var body api.ErrorResponse
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &body); err != nil {
			t.Fatalf("%s: tool error %q: %v", name, res.Content[0].(*mcp.TextContent).Text, err)
		}
		return res, &body
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res, nil
}

// mustCall is callTool for a call that must succeed.
func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args, out any) *mcp.CallToolResult {
	t.Helper()
	res, e := callTool(t, cs, name, args, out)
	if e != nil {
		t.Fatalf("%s: %+v", name, e.Error)
	}
	return res
}

func textOf(res *mcp.CallToolResult) string {
	var s []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

// conformanceRuns are the official suite's server scenarios that hold for any MCP server,
// whatever its tools, at each protocol revision they apply to: lifecycle (initialize, the
// handshake-era session lifecycle, ping), listing (tools/list), DNS-rebinding protection, and
// stateless operation (2026-07-28) with its HTTP headers. The suite's other server scenarios
// call the reference server's own tools, prompts and resources (test_simple_text, ...), which
// agentbox does not have.
var conformanceRuns = []struct{ scenario, version string }{
	{"server-initialize", "2025-06-18"},
	{"server-initialize", "2025-11-25"},
	{"server-session-lifecycle", "2025-11-25"},
	{"ping", "2025-11-25"},
	{"tools-list", "2025-06-18"},
	{"tools-list", "2025-11-25"},
	{"tools-list", "2026-07-28"},
	{"dns-rebinding-protection", "2025-11-25"},
	{"dns-rebinding-protection", "2026-07-28"},
	{"server-stateless", "2026-07-28"},
	{"http-header-validation", "2026-07-28"},
}

// conformanceCheck is one check of the suite's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
	Details      struct {
		Untestable bool `json:"untestable"`
	} `json:"details"`
}

// The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
// scripts/mcp-tools) against the daemon's own /mcp: every check of the scenarios that apply to
// any server passes, but those the suite itself marks untestable here (they call the reference
// server's diagnostic tools, test_missing_capability and the like).
func TestMCPConformance(t *testing.T) {
	tools := testenv.RequireMCPTools(t)
	d := startMCPDaemon(t, nil)
	var log bytes.Buffer
	passed, failed, untestable := 0, 0, 0
	for _, r := range conformanceRuns {
		dir := t.TempDir()
		args := tools.Conformance("server", "--url", d.keyless+"/mcp", "--scenario", r.scenario, "--spec-version", r.version, "-o", dir)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env, cmd.Dir = tools.Env(), dir
		out, err := cmd.CombinedOutput()
		cancel()
		log.Write(out)
		files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
		if len(files) != 1 {
			t.Errorf("%s at %s: no checks.json (%v)\n%s", r.scenario, r.version, err, out)
			continue
		}
		b, _ := os.ReadFile(files[0])
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", files[0], err)
		}
		ok := 0
		for _, c := range checks {
			switch {
			case c.Status == "SUCCESS":
				ok++
			case c.Status == "FAILURE" && c.Details.Untestable:
				untestable++
				t.Logf("%s at %s: %s not testable here: %s", r.scenario, r.version, c.ID, c.ErrorMessage)
			case c.Status == "FAILURE" || c.Status == "WARNING":
				failed++
				t.Errorf("%s at %s: %s %s: %s", r.scenario, r.version, c.ID, c.Status, c.ErrorMessage)
			}
		}
		passed += ok
		if ok == 0 && r.scenario != "server-session-lifecycle" { // stateless: no session to end
			t.Errorf("%s at %s: no check passed\n%s", r.scenario, r.version, out)
		}
	}
	if os.Getenv("AGENTBOX_MCP_CONFORMANCE_FULL") == "1" {
		// The whole active suite, for the record: its closing lines say what the scenarios that
		// need the reference server's tools, prompts and resources make of a server without them.
		dir := t.TempDir()
		args := tools.Conformance("server", "--url", d.keyless+"/mcp", "-o", dir)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env, cmd.Dir = tools.Env(), dir
		out, _ := cmd.CombinedOutput()
		log.WriteString("\n=== the whole active suite ===\n")
		log.Write(out)
	}
	if p := os.Getenv("AGENTBOX_MCP_CONFORMANCE_LOG"); p != "" {
		_ = os.WriteFile(p, log.Bytes(), 0o644)
	}
	t.Logf("conformance %s: %d scenario runs, %d checks passed, %d failed, %d not testable here",
		tools.ConformanceVersion(), len(conformanceRuns), passed, failed, untestable)
}

// inspector runs the MCP Inspector's CLI and returns its stdout, failing t when it fails.
func inspector(t *testing.T, tools testenv.MCPTools, args ...string) []byte {
	t.Helper()
	cmdline := tools.Inspector(args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	cmd.Env, cmd.Dir = append(tools.Env(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json")), t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %v: %v\nstdout %s\nstderr %s", args, err, out, stderr.String())
	}
	t.Logf("inspector %v: stderr %s", args, stderr.String())
	return out
}

// A real client: the MCP Inspector's CLI (npm @modelcontextprotocol/inspector, pinned in
// scripts/mcp-tools) lists agentbox's tools, with its schema-portability check (--strict: no
// error-severity problem), and calls them: over streamable HTTP at /mcp with the bearer key, and
// over stdio with the built binary's `agentbox mcp` in front of the same daemon.
func TestMCPInspector(t *testing.T) {
	tools := testenv.RequireMCPTools(t)
	d := startMCPDaemon(t, nil)
	overHTTP := []string{d.url + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + key}

	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	out := inspector(t, tools, append(overHTTP, "--method", "tools/list", "--strict")...)
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list: %v\n%s", err, out)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if len(tl.OutputSchema) == 0 {
			t.Errorf("%s has no output schema", tl.Name)
		}
	}
	if len(names) != 19 || !slices.Contains(names, "run_code") || !slices.Contains(names, "audit_query") {
		t.Errorf("the Inspector lists %v", names)
	}

	var res struct {
		IsError           bool `json:"isError"`
		Content           []struct{ Type, Text string }
		StructuredContent api.Result `json:"structuredContent"`
	}
	out = inspector(t, tools, append(overHTTP, "--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code=print(6 * 7)")...)
	if err := json.Unmarshal(out, &res); err != nil || res.IsError || res.StructuredContent.Stdout != "42\n" ||
		res.StructuredContent.Runtime != "nano" || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "42") {
		t.Errorf("run_code over HTTP: %v\n%s", err, out)
	}

	// stdio: the Inspector starts the built binary, which reaches the daemon through its client.
	bin := filepath.Join(t.TempDir(), "agentbox")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentbox")
	build.Dir = "../.."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	stdio := []string{"-e", "AGENTBOX_API_KEY=" + key, "--transport", "stdio", bin, "mcp", "--url", d.url}
	out = inspector(t, tools, append(stdio, "--method", "tools/list")...)
	if err := json.Unmarshal(out, &list); err != nil || len(list.Tools) != 19 {
		t.Errorf("tools/list over stdio: %v\n%s", err, out)
	}
	out = inspector(t, tools, append(stdio, "--method", "tools/call", "--tool-name", "session_create")...)
	var s api.Session
	var created struct {
		StructuredContent *api.Session `json:"structuredContent"`
	}
	created.StructuredContent = &s
	if err := json.Unmarshal(out, &created); err != nil || s.ID == "" {
		t.Fatalf("session_create over stdio: %v\n%s", err, out)
	}
	out = inspector(t, tools, append(stdio, "--method", "tools/call", "--tool-name", "session_run",
		"--tool-arg", "session_id="+s.ID, "--tool-arg", "code=import sys; print(sys.version_info[0])")...)
	if err := json.Unmarshal(out, &res); err != nil || res.IsError || res.StructuredContent.Stdout != "3\n" {
		t.Errorf("session_run over stdio: %v\n%s", err, out)
	}

	// stdio with no daemon: the binary starts an engine of its own (real nano; its audit log and
	// artifacts in the test's directories).
	cfg := filepath.Join(t.TempDir(), "config.json")
	b, _ := json.Marshal(map[string]any{"artifacts_dir": t.TempDir(), "audit": map[string]any{"dir": t.TempDir()},
		"heavy": map[string]any{"enabled": "off"}})
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// (A script, because the Inspector takes --config for itself wherever it stands.)
	script := filepath.Join(t.TempDir(), "agentbox-mcp-local")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec "+bin+" mcp --local --config "+cfg+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out = inspector(t, tools, "--transport", "stdio", script,
		"--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code=import sys; print(sys.platform)")
	if err := json.Unmarshal(out, &res); err != nil || res.IsError || res.StructuredContent.Stdout != "wasi\n" || res.StructuredContent.Runtime != "nano" {
		t.Errorf("run_code over stdio with a local engine: %v\n%s", err, out)
	}
}

// The MCP front door over the real nano tier, with the official Go SDK's client at the newest
// revision and at an older one it negotiates: runs, routing reasons, exceptions, limits as tool
// errors with the API's code and hint, a session's state across runs, the audit log.
func TestMCPOverHTTP(t *testing.T) {
	d := startMCPDaemon(t, nil)
	for _, version := range []string{"", "2025-06-18"} {
		t.Run("version="+version, func(t *testing.T) {
			cs := mcpSession(t, d.url, key, version)
			var r api.Result
			res := mustCall(t, cs, "run_code", map[string]any{"code": "import json\nprint(json.dumps({'a': 1}))"}, &r)
			if r.Stdout != "{\"a\": 1}\n" || r.Runtime != "nano" || r.Routing.Tier != "nano" || len(r.Routing.Reasons) == 0 {
				t.Fatalf("structured content %+v", r)
			}
			if s := textOf(res); !strings.Contains(s, "stdout:\n{\"a\": 1}\n") || !strings.Contains(s, "routing: "+r.Routing.Reasons[0]) {
				t.Errorf("text content %q", s)
			}

			mustCall(t, cs, "run_code", map[string]any{"code": "1/0", "runtime": "nano"}, &r)
			if r.ExitCode != 1 || r.Error == nil || r.Error.Name != "ZeroDivisionError" || !strings.Contains(r.Error.Traceback, "ZeroDivisionError") {
				t.Errorf("an exception: %+v", r)
			}

			_, e := callTool(t, cs, "run_code", map[string]any{"code": "print('before', flush=True)\nwhile True: pass", "timeout": 1}, nil)
			if e == nil || e.Error.Code != api.CodeTimeout || e.Error.Message == "" || e.Result == nil || e.Result.Stdout != "before\n" {
				t.Errorf("a timeout: %+v", e)
			}
			_, e = callTool(t, cs, "run_code", map[string]any{"code": "import pandas", "runtime": "nano"}, nil)
			if e == nil || e.Error.Code != api.CodeInvalidRequest || e.Error.Hint == "" {
				t.Errorf("pandas on nano: %+v", e)
			}

			var s api.Session
			mustCall(t, cs, "session_create", map[string]any{"runtime": "nano"}, &s)
			mustCall(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "x = 6 * 7"}, &r)
			mustCall(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "print(x)"}, &r)
			if r.Stdout != "42\n" {
				t.Errorf("a session's state: %q", r.Stdout)
			}
			var il api.ImageList
			mustCall(t, cs, "image_list", nil, &il)
			if il.Images == nil {
				t.Errorf("images: %+v", il)
			}
			var closed struct{ Closed bool }
			mustCall(t, cs, "session_close", map[string]any{"session_id": s.ID}, &closed)
			if _, e := callTool(t, cs, "session_run", map[string]any{"session_id": s.ID, "code": "print(x)"}, nil); e == nil || e.Error.Code != api.CodeNotFound {
				t.Errorf("a closed session: %+v", e)
			}
			var recs struct{ Records []api.AuditRecord }
			mustCall(t, cs, "audit_query", map[string]any{"session": s.ID}, &recs)
			var kinds []string
			for _, r := range recs.Records {
				kinds = append(kinds, r.Kind)
			}
			if !slices.Equal(kinds, []string{"session.create", "run", "run", "session.close"}) {
				t.Errorf("the session's audit records: %v", kinds)
			}
		})
	}
}

// A tenant's key sees through MCP what it sees through HTTP: its own sessions and records only;
// a key without a tool's scope gets a tool error naming the scope; a wrong key is refused before
// any tool.
func TestMCPTenants(t *testing.T) {
	d := startMCPDaemon(t, nil)
	all := []auth.Scope{auth.ScopeRun, auth.ScopeSessions, auth.ScopeFiles, auth.ScopeEgressIntent, auth.ScopeAuditRead}
	acmeKey, betaKey := d.tenantKey(t, "acme", all...), d.tenantKey(t, "beta", all...)
	acme, beta := mcpSession(t, d.url, acmeKey, ""), mcpSession(t, d.url, betaKey, "")
	betaHTTP, err := client.New(d.url, betaKey)
	if err != nil {
		t.Fatal(err)
	}
	acmeHTTP, err := client.New(d.url, acmeKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	var s api.Session
	mustCall(t, acme, "session_create", nil, &s)
	var r api.Result
	mustCall(t, acme, "session_run", map[string]any{"session_id": s.ID, "code": "secret = 'acme-only'"}, &r)
	// Made over HTTP, seen over MCP: the same View.
	s2, err := acmeHTTP.CreateSession(ctx, api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var sl api.SessionList
	mustCall(t, acme, "session_list", nil, &sl)
	if len(sl.Sessions) != 2 {
		t.Errorf("acme lists %+v, want its two sessions", sl.Sessions)
	}
	for _, id := range []string{s.ID, s2.ID} {
		for tool, args := range map[string]map[string]any{
			"session_run":         {"session_id": id, "code": "print(secret)"},
			"file_list":           {"session_id": id},
			"file_read":           {"session_id": id, "path": "notes.txt"},
			"file_write":          {"session_id": id, "path": "x.txt", "text": "x"},
			"egress_intent_set":   {"session_id": id, "name": "weather-lookup"},
			"egress_intent_clear": {"session_id": id},
			"session_close":       {"session_id": id},
			"session_steps":       {"session_id": id},
			"session_rewind":      {"session_id": id, "step": r.Step},
			"session_fork":        {"session_id": id, "step": r.Step},
			"session_pause":       {"session_id": id},
			"session_resume":      {"session_id": id},
			"step_inspect":        {"session_id": id, "step": r.Step},
			"step_diff":           {"session_id": id, "step": r.Step, "context": "c"},
		} {
			if _, e := callTool(t, beta, tool, args, nil); e == nil || e.Error.Code != api.CodeNotFound {
				t.Errorf("beta's %s on acme's session over MCP: %+v, want not_found", tool, e)
			}
		}
		_, err := betaHTTP.RunInSession(ctx, id, api.RunRequest{Code: "print(secret)"})
		wantCode(t, "beta's run in acme's session over HTTP", err, api.CodeNotFound)
	}
	mustCall(t, beta, "session_list", nil, &sl)
	if len(sl.Sessions) != 0 {
		t.Errorf("beta lists %+v over MCP", sl.Sessions)
	}
	var recs struct{ Records []api.AuditRecord }
	mustCall(t, beta, "audit_query", map[string]any{"tenant": "acme"}, &recs)
	for _, rec := range recs.Records {
		if rec.Tenant != "beta" {
			t.Errorf("beta reads a record of tenant %q: %+v", rec.Tenant, rec)
		}
	}
	mustCall(t, acme, "audit_query", map[string]any{"session": s.ID}, &recs)
	if len(recs.Records) < 2 || recs.Records[0].Tenant != "acme" || recs.Records[0].Agent != "acme-agent" {
		t.Errorf("acme's records of its session: %+v", recs.Records)
	}

	// Scopes: per tool, as per route.
	runOnly := mcpSession(t, d.url, d.tenantKey(t, "acme", auth.ScopeRun), "")
	mustCall(t, runOnly, "run_code", map[string]any{"code": "print(1)"}, &r)
	for tool, scope := range map[string]string{"session_create": "sessions", "audit_query": "audit-read", "file_list": "files", "egress_intent_clear": "egress-intent"} {
		_, e := callTool(t, runOnly, tool, map[string]any{"session_id": s.ID}, nil)
		if tool == "session_create" || tool == "audit_query" {
			_, e = callTool(t, runOnly, tool, nil, nil)
		}
		if e == nil || e.Error.Code != api.CodeForbidden || !strings.Contains(e.Error.Message, "lacks the "+scope+" scope") ||
			!strings.Contains(e.Error.Hint, "--scopes "+scope) {
			t.Errorf("%s with a run-only key: %+v", tool, e)
		}
	}
	sessionsOnly := mcpSession(t, d.url, d.tenantKey(t, "acme", auth.ScopeSessions), "")
	if _, e := callTool(t, sessionsOnly, "run_code", map[string]any{"code": "1"}, nil); e == nil || e.Error.Code != api.CodeForbidden || !strings.Contains(e.Error.Message, "lacks the run scope") {
		t.Errorf("run_code with a sessions-only key: %+v", e)
	}
	var il api.ImageList
	mustCall(t, sessionsOnly, "image_list", nil, &il) // run or sessions, as GET /v1/images

	c := mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1"}, nil)
	_, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"abt_0000000000000000.wrongwrongwrongwrongwrongwrongwrongwrong"}}, MaxRetries: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Errorf("a wrong key connects: %v", err)
	}
}

// The heavy tier through MCP: a matplotlib figure comes back as image content and a DataFrame as
// text and HTML; a session's files; an egress intent set and cleared. Skipped only where runsc is
// not installed.
func TestMCPHeavy(t *testing.T) {
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	profiles := t.TempDir()
	if err := os.WriteFile(filepath.Join(profiles, "test.yaml"), []byte(egressProfiles), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startMCPDaemon(t, func(c *config.Config) {
		warm := 1
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled, h.Warm = heavy.On, &warm }))
		c.Egress.Dir, c.Egress.ProfilesDir = t.TempDir(), profiles
	})
	cs := mcpSession(t, d.url, key, "")

	var r api.Result
	res := mustCall(t, cs, "run_code", map[string]any{"timeout": 120, "code": `
import matplotlib.pyplot as plt
import pandas as pd
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
plt.show()
pd.DataFrame({"x": [1, 2], "y": [1, 4]})
`}, &r)
	if r.Runtime != "heavy" || len(r.Artifacts) != 1 || r.Artifacts[0].MIME != "image/png" || len(r.Outputs) != 1 {
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
	if img == nil || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) || int64(len(img.Data)) != r.Artifacts[0].Size {
		t.Errorf("the figure is not image content: %+v", res.Content)
	}
	if html == nil || html.Resource.MIMEType != "text/html" || !strings.Contains(html.Resource.Text, "<table") {
		t.Errorf("the DataFrame is not HTML: %+v", res.Content)
	}
	if s := textOf(res); !strings.Contains(s, "x  y") || !strings.Contains(s, "routing: ") {
		t.Errorf("text content %q", s)
	}

	var s api.Session
	mustCall(t, cs, "session_create", map[string]any{"runtime": "heavy", "network": true, "egress_profile": "test"}, &s)
	mustCall(t, cs, "file_write", map[string]any{"session_id": s.ID, "path": "data/in.csv", "text": "a,b\n1,2\n"}, nil)
	mustCall(t, cs, "session_run", map[string]any{"session_id": s.ID, "timeout": 60,
		"code": "import pandas as pd\ndf = pd.read_csv('data/in.csv')\ndf['c'] = df.a + df.b\ndf.to_csv('out.csv', index=False)\nprint(df.c.sum())"}, &r)
	if r.Stdout != "3\n" {
		t.Errorf("a run over a written file: %+v", r)
	}
	var f api.OutputFile
	res = mustCall(t, cs, "file_read", map[string]any{"session_id": s.ID, "path": "out.csv"}, &f)
	if string(f.Content) != "a,b,c\n1,2,3\n" || f.Path != "/home/user/out.csv" || textOf(res) != "a,b,c\n1,2,3\n" {
		t.Errorf("file_read: %+v %q", f, textOf(res))
	}
	var fl api.FileList
	mustCall(t, cs, "file_list", map[string]any{"session_id": s.ID}, &fl)
	var paths []string
	for _, fi := range fl.Files {
		paths = append(paths, fi.Path)
	}
	if !slices.Contains(paths, "/home/user/data/in.csv") || !slices.Contains(paths, "/home/user/out.csv") {
		t.Errorf("file_list: %v", paths)
	}
	var in api.Intent
	mustCall(t, cs, "egress_intent_set", map[string]any{"session_id": s.ID, "name": "weather-lookup", "ttl": 60}, &in)
	if in.Name != "weather-lookup" || in.ExpiresAt == nil || time.Until(*in.ExpiresAt) > time.Minute {
		t.Errorf("egress_intent_set: %+v", in)
	}
	if _, e := callTool(t, cs, "egress_intent_set", map[string]any{"session_id": s.ID, "name": "no-such-intent"}, nil); e == nil ||
		e.Error.Code != api.CodeInvalidRequest || !strings.Contains(e.Error.Message, "weather-lookup") {
		t.Errorf("an unknown intent: %+v", e)
	}
	mustCall(t, cs, "egress_intent_clear", map[string]any{"session_id": s.ID}, &in)
	if in.Name != "" || in.ExpiresAt != nil {
		t.Errorf("egress_intent_clear: %+v", in)
	}
	mustCall(t, cs, "session_close", map[string]any{"session_id": s.ID}, nil)
}
