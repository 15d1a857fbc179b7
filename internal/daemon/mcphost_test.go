package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// hostedDaemon is a daemon with the heavy tier and a registry of its own holding
// server-everything (the node-mcp image's), served by an httptest server.
type hostedDaemon struct {
	ts     *httptest.Server
	doors  http.Handler
	hosted *mcphost.Manager
	keys   string
}

// startHostedDaemon starts one, or skips t without root, nano's artifacts, runsc or the node-mcp
// image.
func startHostedDaemon(t *testing.T) *hostedDaemon {
	t.Helper()
	testenv.RequireRoot(t)
	cfg := config.Default()
	cfg.Sessions.Dir = t.TempDir() // sessions that outlive the daemon: this test's own
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	l := heavy.LayoutFor(cfg.DataDir)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("node-mcp"); err != nil {
		testenv.Skip(t, "no node-mcp image: agentbox image build node-mcp ("+err.Error()+")")
	}
	stateDir, warm := t.TempDir(), 0
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, stateDir }))
	cfg.ArtifactsDir, cfg.Audit.Dir = t.TempDir(), t.TempDir()
	log := testLog(t)
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	hcfg := cfg
	hcfg.DataDir = t.TempDir() // the registry of this test's own
	hosted, err := daemon.OpenHostedMCP(hcfg, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hosted.Close() })
	if err := hosted.Add(mcphost.Server{Name: "everything", Image: "node-mcp", Command: []string{"mcp-server-everything"}}); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), auth.KeysFile)
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, KeysFile: keys, Logger: log, HostedMCP: hosted})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(doors)
	t.Cleanup(ts.Close)
	return &hostedDaemon{ts: ts, doors: doors, hosted: hosted, keys: keys}
}

// A hosted MCP server on the running daemon: the reference server-everything in its own gVisor
// sandbox, reached at /mcp/servers/NAME with a tenant key that has the run scope, governed (a
// card number in its arguments is refused before it gets there); a key without the scope is
// refused at the door. Its tools are on /mcp too (NAME__tool), its records in the signed audit log,
// and its registry on /v1/mcp/servers.
func TestDaemonHostsMCPServer(t *testing.T) {
	d := startHostedDaemon(t)
	ts, keys := d.ts, d.keys
	runKey, _, err := auth.CreateKey(keys, "acme", "bot", []auth.Scope{auth.ScopeRun}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "hosted-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp/servers/everything",
		HTTPClient: &http.Client{Transport: bearer{runKey}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello from gvisor"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "hello from gvisor") {
		t.Fatalf("echo through the daemon: %+v %v", res, err)
	}
	// The session belongs to the key that opened it: presented with another tenant's key, or
	// another key of the same tenant, it is not found, and it goes on for its owner.
	if cs.ID() == "" {
		t.Fatal("/mcp/servers/everything gave no Mcp-Session-Id")
	}
	for _, tenant := range []string{"other", "acme"} {
		k, _, err := auth.CreateKey(keys, tenant, "intruder", []auth.Scope{auth.ScopeRun}, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp/servers/everything", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"not_found"`) || strings.Contains(string(b), "echo") {
			t.Errorf("another key (tenant %s) with the session's id: %d %s", tenant, resp.StatusCode, b)
		}
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("the session after another key presented its id: %v", err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "pay with 4111 1111 1111 1111"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "payment card") || strings.Contains(textOf(res), "4111 1111") {
		t.Errorf("a card number in the arguments: %+v %v", res, err)
	}

	// The same server's tools on agentbox's own /mcp, beside agentbox's, named NAME__tool, and
	// governed the same way.
	own, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{runKey}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	names := map[string]bool{}
	for tool, err := range own.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names[tool.Name] = true
	}
	if !names["run_code"] || !names["everything__echo"] || names["echo"] {
		t.Errorf("tools on /mcp: %v", names)
	}
	res, err = own.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "namespaced"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "namespaced") {
		t.Fatalf("everything__echo on /mcp: %+v %v", res, err)
	}
	res, err = own.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "pay with 4111 1111 1111 1111"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "payment card") || strings.Contains(textOf(res), "4111 1111") {
		t.Errorf("a card number through /mcp: %+v %v", res, err)
	}
	res, err = own.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch__echo", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "not_found") {
		t.Errorf("an unknown hosted server on /mcp: %+v %v", res, err)
	}

	// Every call, and the pin, are records of the daemon's signed audit log with the tenant of
	// the key that asked, digests and redacted excerpts only.
	areq, _ := http.NewRequest("GET", ts.URL+"/v1/audit?kind=mcp&limit=1000", nil)
	areq.Header.Set("Authorization", "Bearer "+key)
	aresp, err := http.DefaultClient.Do(areq)
	if err != nil {
		t.Fatal(err)
	}
	var list api.AuditList
	err = json.NewDecoder(aresp.Body).Decode(&list)
	aresp.Body.Close()
	if err != nil || aresp.StatusCode != 200 {
		t.Fatalf("GET /v1/audit: %d %v", aresp.StatusCode, err)
	}
	kinds := map[string]int{}
	for _, line := range list.Records {
		var r api.AuditRecord
		if err := json.Unmarshal(line, &r); err != nil || r.MCP == nil || r.MCP.Server == "" {
			t.Fatalf("an mcp record: %s %v", line, err)
		}
		kinds[r.Kind+" "+r.Decision]++
		if strings.Contains(string(line), "4111 1111") {
			t.Errorf("a card number in the audit log: %s", line)
		}
		if r.Kind == "mcp.call" && (r.Tenant != "acme" || r.MCP.ArgsSHA256 == "") {
			t.Errorf("a call's record: %s", line)
		}
	}
	if kinds["mcp.pin allow"] != 1 || kinds["mcp.call allow"] != 2 || kinds["mcp.call block"] != 2 || kinds["mcp.call error"] != 1 {
		t.Errorf("mcp records in the audit log: %v", kinds)
	}

	// The registry over the HTTP API (admin scope), through the Go client.
	admin, err := client.New(ts.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := admin.ListMCPServers(ctx)
	if err != nil || len(servers) != 1 || servers[0].Name != "everything" || !servers[0].Running || servers[0].Added == nil {
		t.Fatalf("GET /v1/mcp/servers: %+v %v", servers, err)
	}
	added, err := admin.AddMCPServer(ctx, api.MCPServer{Name: "memory", Image: "node-mcp", Command: []string{"mcp-server-memory"}, Deny: []string{"delete_entities"}})
	if err != nil || added.Name != "memory" || added.Added == nil || len(added.Deny) != 1 {
		t.Fatalf("POST /v1/mcp/servers: %+v %v", added, err)
	}
	if _, err := admin.AddMCPServer(ctx, api.MCPServer{Name: "memory", Image: "node-mcp", Command: []string{"x"}}); !isCode(err, api.CodeConflict) {
		t.Errorf("a second server named memory: %v", err)
	}
	if _, err := admin.AddMCPServer(ctx, api.MCPServer{Name: "Bad_Name", Image: "node-mcp", Command: []string{"x"}}); !isCode(err, api.CodeInvalidRequest) {
		t.Errorf("a bad name: %v", err)
	}
	pin, err := admin.ApproveMCPServer(ctx, "everything")
	if err != nil || !pin.Approved || pin.Tools["echo"] == "" || pin.ImageHash == "" {
		t.Fatalf("POST /v1/mcp/servers/everything/approve: %+v %v", pin, err)
	}
	if err := admin.RemoveMCPServer(ctx, "memory"); err != nil {
		t.Fatal(err)
	}
	if err := admin.RemoveMCPServer(ctx, "memory"); !isCode(err, api.CodeNotFound) {
		t.Errorf("removing it again: %v", err)
	}
	bot, _ := client.New(ts.URL, runKey)
	if _, err := bot.ListMCPServers(ctx); !isCode(err, api.CodeForbidden) {
		t.Errorf("a run key lists the registry: %v", err)
	}

	// A key without the run scope is refused at the door.
	sessionsKey, _, err := auth.CreateKey(keys, "acme", "bot", []auth.Scope{auth.ScopeSessions}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/mcp/servers/everything", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+sessionsKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "forbidden") || !strings.Contains(string(body), "run scope") {
		t.Errorf("a key without run: %d %s", resp.StatusCode, body)
	}
}

func isCode(err error, code string) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Code == code
}

// A real client against a hosted server: the MCP Inspector's CLI lists server-everything's tools
// (hosted in gVisor) and calls one, both at /mcp/servers/everything and as everything__TOOL on
// agentbox's own /mcp, and reads one of its resources and gets one of its prompts through the
// gateway; a card number in the arguments is refused as the Inspector shows it.
func TestMCPInspectorHosted(t *testing.T) {
	tools := testenv.RequireMCPTools(t)
	d := startHostedDaemon(t)
	auth := []string{"--transport", "http", "--header", "Authorization: Bearer " + key}
	hosted := append([]string{d.ts.URL + "/mcp/servers/everything"}, auth...)
	own := append([]string{d.ts.URL + "/mcp"}, auth...)

	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	names := func(out []byte) []string {
		list.Tools = nil
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("tools/list: %v\n%s", err, out)
		}
		var n []string
		for _, tl := range list.Tools {
			n = append(n, tl.Name)
		}
		return n
	}
	direct := names(inspector(t, tools, append(hosted, "--method", "tools/list")...))
	if !slices.Contains(direct, "echo") || !slices.Contains(direct, "get-sum") {
		t.Errorf("the Inspector lists at /mcp/servers/everything: %v", direct)
	}
	ns := names(inspector(t, tools, append(own, "--method", "tools/list")...))
	if !slices.Contains(ns, "run_code") || !slices.Contains(ns, "everything__echo") || len(ns) != 19+len(direct) {
		t.Errorf("the Inspector lists at /mcp: %v (server-everything has %d)", ns, len(direct))
	}

	var res struct {
		IsError bool `json:"isError"`
		Content []struct{ Type, Text string }
	}
	call := func(args ...string) {
		t.Helper()
		res.IsError, res.Content = false, nil
		out := inspector(t, tools, args...)
		if err := json.Unmarshal(out, &res); err != nil || len(res.Content) == 0 {
			t.Fatalf("tools/call: %v\n%s", err, out)
		}
	}
	call(append(hosted, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hello inspector")...)
	if res.IsError || !strings.Contains(res.Content[0].Text, "hello inspector") {
		t.Errorf("echo at /mcp/servers/everything: %+v", res)
	}
	call(append(own, "--method", "tools/call", "--tool-name", "everything__get-sum", "--tool-arg", "a=2", "--tool-arg", "b=40")...)
	if res.IsError || !strings.Contains(res.Content[0].Text, "42") {
		t.Errorf("everything__get-sum at /mcp: %+v", res)
	}
	// A tool error makes the Inspector exit 5, with the result on stdout.
	cmdline := tools.Inspector(append(own, "--method", "tools/call", "--tool-name", "everything__echo", "--tool-arg", "message=card 4111 1111 1111 1111")...)
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Env, cmd.Dir = append(tools.Env(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json")), t.TempDir()
	out, _ := cmd.Output()
	res.IsError, res.Content = false, nil
	if err := json.Unmarshal(out, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("a card number through /mcp: %v\n%s", err, out)
	}
	if !res.IsError || !strings.Contains(res.Content[0].Text, "payment card") || strings.Contains(res.Content[0].Text, "4111 1111") {
		t.Errorf("a card number through /mcp: %+v", res)
	}

	var resources struct {
		Resources []struct{ URI, Name string } `json:"resources"`
	}
	out = inspector(t, tools, append(hosted, "--method", "resources/list")...)
	if err := json.Unmarshal(out, &resources); err != nil || len(resources.Resources) == 0 {
		t.Fatalf("resources/list: %v\n%s", err, out)
	}
	var read struct {
		Contents []struct{ URI, Text, Blob string } `json:"contents"`
	}
	out = inspector(t, tools, append(hosted, "--method", "resources/read", "--uri", resources.Resources[0].URI)...)
	if err := json.Unmarshal(out, &read); err != nil || len(read.Contents) == 0 || read.Contents[0].Text+read.Contents[0].Blob == "" {
		t.Errorf("resources/read %s: %v\n%s", resources.Resources[0].URI, err, out)
	}
	var prompts struct {
		Prompts []struct {
			Name      string `json:"name"`
			Arguments []struct {
				Required bool `json:"required"`
			} `json:"arguments"`
		} `json:"prompts"`
	}
	out = inspector(t, tools, append(hosted, "--method", "prompts/list")...)
	if err := json.Unmarshal(out, &prompts); err != nil || len(prompts.Prompts) == 0 {
		t.Fatalf("prompts/list: %v\n%s", err, out)
	}
	for _, p := range prompts.Prompts {
		if slices.ContainsFunc(p.Arguments, func(a struct {
			Required bool `json:"required"`
		}) bool {
			return a.Required
		}) {
			continue
		}
		var got struct {
			Messages []json.RawMessage `json:"messages"`
		}
		out = inspector(t, tools, append(hosted, "--method", "prompts/get", "--prompt-name", p.Name)...)
		if err := json.Unmarshal(out, &got); err != nil || len(got.Messages) == 0 {
			t.Errorf("prompts/get %s: %v\n%s", p.Name, err, out)
		}
		break
	}
}
