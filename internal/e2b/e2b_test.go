package e2b_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/e2b"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

const bootstrap = "abk_test-bootstrap-key-0123456789"

// fixture is the E2B front door over a real Manager with a fake tier, the keys of two tenants,
// and a service on envd's port that reports the Target it was given.
type fixture struct {
	t    *testing.T
	opts e2b.Options
	srv  *httptest.Server
	h    *e2b.Handler
	keyA string
	keyB string
	// keysFile holds keyA's and keyB's records.
	keysFile string
	recA     auth.KeyRecord
	target   atomic.Pointer[e2bwire.Target]
	now      atomic.Pointer[time.Time]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rt := runtimetest.NewFake(sandbox.Capabilities{Tier: "heavy", Sessions: true, SessionFiles: true, Images: true, Network: true})
	rt.Answer = runtimetest.Echo
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	keysFile := filepath.Join(t.TempDir(), auth.KeysFile)
	f := &fixture{t: t, keysFile: keysFile}
	var recB auth.KeyRecord
	f.keyA, f.recA = newKey(t, keysFile, "acme")
	f.keyB, recB = newKey(t, keysFile, "globex")
	_ = recB
	keys, err := auth.NewKeys(bootstrap, keysFile)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.now.Store(&now)
	envd := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg, ok := e2bwire.TargetOf(r.Context())
		if !ok {
			t.Error("the service got no Target")
		}
		f.target.Store(&tg)
		_, _ = io.WriteString(w, "envd:"+r.URL.Path)
	})
	f.opts = e2b.Options{
		Engine: m, Keys: keys, TokenSecret: []byte("0123456789abcdef0123456789abcdef"), Domain: "e2b.test",
		Templates: map[string]e2b.Template{"base": {Tier: "heavy"}, "code-interpreter-v1": {Tier: "heavy"}},
		Services:  map[int]http.Handler{e2bwire.EnvdPort: envd},
		Logger:    slog.New(slog.DiscardHandler),
		Now:       func() time.Time { return *f.now.Load() },
		StateFile: filepath.Join(t.TempDir(), "e2b", "sandboxes.json"),
	}
	f.h, err = e2b.New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.h.Close() })
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close)
	return f
}

func newKey(t *testing.T, file, tenant string) (string, auth.KeyRecord) {
	t.Helper()
	k, rec, err := auth.NewKey(tenant, tenant+"-agent", []auth.Scope{auth.ScopeSessions, auth.ScopeFiles, auth.ScopeRun}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.UpdateKeyFile(file, func(r []auth.KeyRecord) ([]auth.KeyRecord, error) { return append(r, rec), nil }); err != nil {
		t.Fatal(err)
	}
	return k, rec
}

// do sends a request with Host host and the given headers; body is JSON-encoded unless nil.
func (f *fixture) do(method, host, path string, hdr map[string]string, body any) (*http.Response, []byte) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (f *fixture) api(method, path, key string, body any) (*http.Response, []byte) {
	f.t.Helper()
	return f.do(method, "api.e2b.test", path, map[string]string{"X-API-Key": key}, body)
}

type created struct {
	SandboxID, TemplateID, EnvdVersion, EnvdAccessToken, TrafficAccessToken string
}

func (f *fixture) create(key string, body map[string]any) created {
	f.t.Helper()
	resp, b := f.api("POST", "/v2/sandboxes", key, body)
	if resp.StatusCode != http.StatusCreated {
		f.t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var c created
	if err := json.Unmarshal(b, &c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

func wantStatus(t *testing.T, what string, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: %d %s, want %d", what, resp.StatusCode, body, status)
	}
}

func TestControlPlane(t *testing.T) {
	f := newFixture(t)
	sb := f.create(f.keyA, map[string]any{"templateID": "code-interpreter-v1", "timeout": 60,
		"metadata": map[string]string{"user": "ada", "job": "x y"}, "envVars": map[string]string{"A": "1"}, "allow_internet_access": false})
	if !strings.HasPrefix(sb.SandboxID, "sb") || sb.EnvdAccessToken == "" || sb.TrafficAccessToken == "" || sb.EnvdVersion != e2bwire.EnvdVersion {
		t.Fatalf("create answered %+v", sb)
	}
	f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false, "metadata": map[string]string{"user": "bob"}})
	f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})

	resp, b := f.api("GET", "/sandboxes/"+sb.SandboxID, f.keyA, nil)
	wantStatus(t, "get", resp, b, 200)
	var info struct {
		SandboxID, TemplateID, State, StartedAt, EndAt string
		Metadata                                       map[string]string
	}
	_ = json.Unmarshal(b, &info)
	if info.SandboxID != sb.SandboxID || info.TemplateID != "code-interpreter-v1" || info.State != "running" || info.Metadata["job"] != "x y" {
		t.Errorf("get answered %s", b)
	}
	start, _ := time.Parse(time.RFC3339, info.StartedAt)
	end, _ := time.Parse(time.RFC3339, info.EndAt)
	if d := end.Sub(start); d < 59*time.Second || d > 61*time.Second {
		t.Errorf("endAt - startedAt = %v, want the 60s timeout", d)
	}

	// list: pages of 2 and a metadata filter, encoded as the SDK encodes it.
	var ids []string
	token := ""
	for page := 0; ; page++ {
		q := url.Values{"limit": {"2"}}
		if token != "" {
			q.Set("nextToken", token)
		}
		resp, b := f.api("GET", "/v2/sandboxes?"+q.Encode(), f.keyA, nil)
		wantStatus(t, "list", resp, b, 200)
		var items []struct{ SandboxID string }
		_ = json.Unmarshal(b, &items)
		for _, it := range items {
			ids = append(ids, it.SandboxID)
		}
		token = resp.Header.Get("X-Next-Token")
		if token == "" || page > 3 {
			break
		}
	}
	if len(ids) != 3 {
		t.Errorf("listed %v in pages of 2, want 3 sandboxes", ids)
	}
	md := url.Values{url.QueryEscape("job"): {url.QueryEscape("x y")}}.Encode()
	resp, b = f.api("GET", "/v2/sandboxes?metadata="+url.QueryEscape(md)+"&state=running,paused", f.keyA, nil)
	wantStatus(t, "list by metadata", resp, b, 200)
	if !strings.Contains(string(b), sb.SandboxID) || strings.Count(string(b), `"sandboxID"`) != 1 {
		t.Errorf("list by metadata job=x y: %s", b)
	}

	// setTimeout, then the reaper kills it when the clock passes its end.
	resp, b = f.api("POST", "/sandboxes/"+sb.SandboxID+"/timeout", f.keyA, map[string]any{"timeout": 5})
	wantStatus(t, "setTimeout", resp, b, 204)
	later := time.Now().Add(10 * time.Second)
	f.now.Store(&later)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, b = f.api("GET", "/sandboxes/"+sb.SandboxID, f.keyA, nil)
		if resp.StatusCode == 404 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantStatus(t, "get after the timeout", resp, b, 404)
	if !strings.Contains(string(b), `"code":404`) {
		t.Errorf("a 404's body %s has no code 404 (the SDK reads it)", b)
	}
}

func TestKillAndConnect(t *testing.T) {
	f := newFixture(t)
	sb := f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})
	resp, b := f.api("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", f.keyA, map[string]any{"timeout": 30})
	wantStatus(t, "connect to a running sandbox", resp, b, 200)
	var c created
	_ = json.Unmarshal(b, &c)
	if c.SandboxID != sb.SandboxID || c.EnvdAccessToken == "" {
		t.Errorf("connect answered %s", b)
	}
	resp, b = f.api("DELETE", "/sandboxes/"+sb.SandboxID, f.keyA, nil)
	wantStatus(t, "kill", resp, b, 204)
	resp, b = f.api("DELETE", "/sandboxes/"+sb.SandboxID, f.keyA, nil)
	wantStatus(t, "kill again", resp, b, 404)
	resp, b = f.api("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", f.keyA, map[string]any{"timeout": 30})
	wantStatus(t, "connect to a killed sandbox", resp, b, 404)
	// The in-sandbox services of a killed sandbox answer 502, which the SDKs read as "not running".
	resp, b = f.do("GET", "49983-"+sb.SandboxID+".e2b.test", "/health", map[string]string{"X-Access-Token": sb.EnvdAccessToken}, nil)
	wantStatus(t, "envd of a killed sandbox", resp, b, 502)
}

// TestTenants: another tenant's sandbox is not found, on the control plane and inside, and a
// token of one sandbox opens no other.
func TestTenants(t *testing.T) {
	f := newFixture(t)
	a := f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})
	b2 := f.create(f.keyB, map[string]any{"templateID": "base", "allow_internet_access": false})
	for _, c := range []struct{ method, path string }{
		{"GET", "/sandboxes/" + a.SandboxID},
		{"DELETE", "/sandboxes/" + a.SandboxID},
		{"POST", "/sandboxes/" + a.SandboxID + "/timeout"},
		{"POST", "/sandboxes/" + a.SandboxID + "/pause"},
		{"POST", "/v2/sandboxes/" + a.SandboxID + "/connect"},
	} {
		resp, b := f.api(c.method, c.path, f.keyB, map[string]any{"timeout": 10})
		wantStatus(t, "globex: "+c.method+" "+c.path, resp, b, 404)
	}
	resp, b := f.api("GET", "/v2/sandboxes", f.keyB, nil)
	if strings.Contains(string(b), a.SandboxID) || !strings.Contains(string(b), b2.SandboxID) {
		t.Errorf("globex lists %s", b)
	}
	wantStatus(t, "list", resp, b, 200)
	host := "49983-" + a.SandboxID + ".e2b.test"
	// B's token for B's sandbox does not open A's; B's API key finds no such sandbox.
	resp, b = f.do("GET", host, "/health", map[string]string{"X-Access-Token": b2.EnvdAccessToken}, nil)
	wantStatus(t, "A's envd with B's token", resp, b, 401)
	resp, b = f.do("GET", host, "/health", map[string]string{"X-API-Key": f.keyB}, nil)
	wantStatus(t, "A's envd with B's key", resp, b, 502)
	resp, b = f.do("GET", host, "/health", nil, nil)
	wantStatus(t, "A's envd without credentials", resp, b, 401)
	// A's token reaches the service, which gets A's session and identity.
	resp, b = f.do("GET", host, "/health", map[string]string{"X-Access-Token": a.EnvdAccessToken}, nil)
	wantStatus(t, "A's envd with A's token", resp, b, 200)
	tg := f.target.Load()
	sess, _ := e2bwire.SessionID(a.SandboxID)
	if tg == nil || tg.SessionID != sess || tg.Port != e2bwire.EnvdPort || tg.Identity.Tenant != "acme" || tg.Identity.KeyID != f.recA.ID {
		t.Errorf("the service got %+v", tg)
	}
}

// TestAddressing: a sandbox's port by its name, or by the SDK's headers on any name (one
// address, E2B_SANDBOX_URL); the control plane at api.DOMAIN or any other name.
func TestAddressing(t *testing.T) {
	f := newFixture(t)
	sb := f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})
	tok := map[string]string{"X-Access-Token": sb.EnvdAccessToken}
	resp, b := f.do("POST", "49983-"+sb.SandboxID+".E2B.test.", "/process.Process/List", tok, nil)
	if resp.StatusCode != 200 || string(b) != "envd:/process.Process/List" {
		t.Errorf("by name: %d %s", resp.StatusCode, b)
	}
	hdr := map[string]string{"X-Access-Token": sb.EnvdAccessToken, "E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983"}
	resp, b = f.do("GET", "127.0.0.1:8443", "/health", hdr, nil)
	if resp.StatusCode != 200 || string(b) != "envd:/health" {
		t.Errorf("by headers: %d %s", resp.StatusCode, b)
	}
	resp, b = f.do("GET", "agentbox.internal:8443", "/v2/sandboxes", map[string]string{"X-API-Key": f.keyA, "X-Request-Id": "req-42"}, nil)
	wantStatus(t, "control plane on another name", resp, b, 200)
	if got := resp.Header.Get("X-Request-Id"); got != "req-42" {
		t.Errorf("X-Request-Id %q, want the client's req-42", got)
	}
	resp, b = f.do("GET", "nope.e2b.test", "/health", nil, nil)
	wantStatus(t, "an unknown name under the domain", resp, b, 404)
	if !f.h.Owns("api.e2b.test:443") || !f.h.Owns("49999-sbabc.e2b.test") || f.h.Owns("e2b.test") || f.h.Owns("a.b.e2b.test") || f.h.Owns("127.0.0.1:8420") {
		t.Error("Owns claims the wrong names")
	}
}

// TestNotImplemented: every call the SDKs make that agentbox does not serve is a 501 whose
// message names the call.
func TestNotImplemented(t *testing.T) {
	f := newFixture(t)
	sb := f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})
	for _, c := range []struct{ method, host, path, names string }{
		{"GET", "api.e2b.test", "/sandboxes/" + sb.SandboxID + "/metrics", "Sandbox.getMetrics"},
		{"POST", "api.e2b.test", "/sandboxes/" + sb.SandboxID + "/snapshots", "Sandbox.createSnapshot"},
		{"POST", "api.e2b.test", "/sandboxes/" + sb.SandboxID + "/fork", "Sandbox.fork"},
		{"PUT", "api.e2b.test", "/sandboxes/" + sb.SandboxID + "/network", "Sandbox.updateNetwork"},
		{"GET", "api.e2b.test", "/volumes", "GET /volumes"},
		{"POST", "49999-" + sb.SandboxID + ".e2b.test", "/execute", "POST /execute (code interpreter, port 49999)"},
		{"GET", "8080-" + sb.SandboxID + ".e2b.test", "/", "port 8080"},
	} {
		resp, b := f.do(c.method, c.host, c.path, map[string]string{"X-API-Key": f.keyA, "X-Access-Token": sb.EnvdAccessToken}, map[string]any{})
		var body e2bwire.Body
		_ = json.Unmarshal(b, &body)
		if resp.StatusCode != 501 || body.Code != 501 || !strings.Contains(body.Message, c.names) || !strings.Contains(body.Message, "not implemented") {
			t.Errorf("%s %s%s: %d %s, want 501 naming %q", c.method, c.host, c.path, resp.StatusCode, b, c.names)
		}
	}
	resp, b := f.api("POST", "/v2/sandboxes", f.keyA, map[string]any{"templateID": "base", "mcp": map[string]any{"x": 1}})
	wantStatus(t, "create with mcp", resp, b, 501)
	resp, b = f.api("POST", "/v2/sandboxes", f.keyA, map[string]any{"templateID": "my-own"})
	wantStatus(t, "create from an unknown template", resp, b, 404)
	resp, b = f.api("POST", "/v2/sandboxes", "wrong", map[string]any{"templateID": "base"})
	wantStatus(t, "create with a wrong key", resp, b, 401)
	resp, b = f.api("POST", "/v2/sandboxes", f.keyA, map[string]any{"templateID": "base", "timeout": 999999})
	wantStatus(t, "create with a timeout over the bound", resp, b, 400)
}

// TestRecordsSurviveRestart: a sandbox's template, metadata and timeout are kept in the state
// file, so a front door started again over the same sessions (a restarted daemon) knows them.
func TestRecordsSurviveRestart(t *testing.T) {
	f := newFixture(t)
	sb := f.create(f.keyA, map[string]any{"templateID": "code-interpreter-v1", "timeout": 120,
		"metadata": map[string]string{"job": "nightly"}, "allow_internet_access": false})
	f.h.Close()
	h2, err := e2b.New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h2.Close() })
	srv := httptest.NewServer(h2)
	t.Cleanup(srv.Close)
	f.srv = srv
	resp, b := f.api("GET", "/sandboxes/"+sb.SandboxID, f.keyA, nil)
	wantStatus(t, "get after a restart", resp, b, 200)
	var info struct {
		TemplateID, StartedAt, EndAt string
		Metadata                     map[string]string
	}
	_ = json.Unmarshal(b, &info)
	start, _ := time.Parse(time.RFC3339, info.StartedAt)
	end, _ := time.Parse(time.RFC3339, info.EndAt)
	if info.TemplateID != "code-interpreter-v1" || info.Metadata["job"] != "nightly" || end.Sub(start) < 119*time.Second {
		t.Errorf("after a restart: %s", b)
	}
	// The access token issued before the restart still opens the sandbox.
	resp, b = f.do("GET", "49983-"+sb.SandboxID+".e2b.test", "/health", map[string]string{"X-Access-Token": sb.EnvdAccessToken}, nil)
	wantStatus(t, "the old token after a restart", resp, b, 200)
}

// A sandbox's access tokens are only as good as the key they were issued to: once that key is
// revoked, its envd and traffic tokens are refused (401) at the next request, as the key is on
// the control plane, while another key's tokens keep working.
func TestRevokedKeysTokensStopWorking(t *testing.T) {
	f := newFixture(t)
	mine := f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})
	theirs := f.create(f.keyB, map[string]any{"templateID": "base", "allow_internet_access": false})
	envdHost := func(c created) string { return "49983-" + c.SandboxID + ".e2b.test" }
	use := func(c created, header, tok string) (*http.Response, []byte) {
		return f.do("GET", envdHost(c), "/files?path=x", map[string]string{header: tok}, nil)
	}
	for _, h := range []struct{ header, tok string }{{"X-Access-Token", mine.EnvdAccessToken}, {"E2B-Traffic-Access-Token", mine.TrafficAccessToken}} {
		resp, b := use(mine, h.header, h.tok)
		wantStatus(t, h.header+" before the revocation", resp, b, 200)
	}
	if _, err := auth.RevokeKey(f.keysFile, f.recA.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct{ header, tok string }{{"X-Access-Token", mine.EnvdAccessToken}, {"E2B-Traffic-Access-Token", mine.TrafficAccessToken}} {
		resp, b := use(mine, h.header, h.tok)
		wantStatus(t, h.header+" of a revoked key", resp, b, 401)
		if !strings.Contains(string(b), "revoked") {
			t.Errorf("%s of a revoked key: %s, want it to say the key was revoked", h.header, b)
		}
	}
	resp, b := f.api("GET", "/sandboxes/"+mine.SandboxID, f.keyA, nil)
	wantStatus(t, "the control plane with a revoked key", resp, b, 401)
	resp, b = use(theirs, "X-Access-Token", theirs.EnvdAccessToken)
	wantStatus(t, "another key's token", resp, b, 200)
}
