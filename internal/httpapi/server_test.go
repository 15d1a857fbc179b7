package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/httpapi"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

const testKey = "test-key-0123456789"

// testPolicy has small bounds so that tests can go over them cheaply.
func testPolicy() sandbox.Policy {
	p := sandbox.DefaultPolicy()
	p.MaxCodeBytes = 1000
	p.MaxFiles = 3
	return p
}

const testMaxBody = 64 << 10

type env struct {
	url string
	srv *httpapi.API
	rt  *runtimetest.Fake
	m   *sandbox.Manager
	c   *client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rt := newFake()
	p := testPolicy()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{
		Runtimes: []sandbox.Runtime{rt},
		// The build has a heavy tier this daemon does not run, as a daemon without runsc.
		Known:  []sandbox.Tier{tierNano, "heavy"},
		Policy: &p,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	srv, err := httpapi.New(httpapi.Options{
		Engine:       m,
		APIKey:       testKey,
		MaxBodyBytes: testMaxBody,
		Version:      "1.2.3-test",
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return &env{url: hs.URL, srv: srv, rt: rt, m: m, c: c}
}

// do sends a raw request and returns the status and body.
func (e *env) do(t *testing.T, method, path, key string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func errorBody(t *testing.T, b []byte) api.ErrorResponse {
	t.Helper()
	var e api.ErrorResponse
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body without code or message: %s", b)
	}
	return e
}

func TestRunOK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.c.Run(context.Background(), api.RunRequest{
		Code:     "print('ok')",
		Runtime:  "nano",
		Timeout:  2.5,
		MemoryMB: 64,
		Files:    []api.InputFile{{Path: "in.txt", Content: []byte("hello\x00bytes")}},
		Env:      map[string]string{"A": "1"},
		Deterministic: &api.Deterministic{
			Time: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC), Seed: 42,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "ok\n" || res.ExitCode != 0 || res.Error != nil || res.Runtime != "nano" {
		t.Errorf("result %+v", res)
	}
	if res.Routing.Tier != "nano" || len(res.Routing.Reasons) == 0 {
		t.Errorf("routing %+v, want nano with reasons", res.Routing)
	}
	if res.Timings.TotalMS != 2 || res.Timings.StartMS != 0.3 || res.Timings.Pool != "warm" {
		t.Errorf("timings %+v", res.Timings)
	}
	if len(res.Files) != 1 || string(res.Files[0].Content) != "hello\x00bytes" || res.Files[0].Size != 11 {
		t.Errorf("files %+v", res.Files)
	}
	// The request reached the runtime in the core's units.
	got := lastRun(t, e.rt)
	if got.Limits.Timeout != 2500*time.Millisecond || got.Limits.MemoryBytes != 64<<20 || got.Tier != tierNano {
		t.Errorf("runtime got limits %+v tier %q", got.Limits, got.Tier)
	}
	if got.Files[0].Path != "in.txt" || got.Env["A"] != "1" || got.Deterministic.Seed != 42 ||
		!got.Deterministic.Time.Equal(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)) {
		t.Errorf("runtime got %+v", got)
	}
}

func TestRunWireFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	status, h, b := e.do(t, "POST", "/v1/run", testKey, []byte(`{"code":"x","runtime":"auto","timeout":1}`))
	if status != 200 || h.Get("Content-Type") != "application/json" || h.Get("X-Request-Id") == "" {
		t.Fatalf("status %d headers %v", status, h)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"stdout", "stderr", "exit_code", "error", "runtime", "routing", "stdout_truncated", "stderr_truncated", "files", "timings"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result has no %q: %s", k, b)
		}
	}
	if m["error"] != nil {
		t.Errorf("error = %v, want null", m["error"])
	}
}

func TestRunPythonExceptionIsAResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.c.Run(context.Background(), api.RunRequest{Code: "raise"})
	if err != nil {
		t.Fatalf("an exception in the code is not an API error: %v", err)
	}
	if res.Error == nil || res.Error.Name != "ZeroDivisionError" || res.Error.Value != "division by zero" ||
		!strings.Contains(res.Error.Traceback, "Traceback") || res.ExitCode != 1 {
		t.Errorf("result %+v error %+v", res, res.Error)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := strings.Repeat("x", 1001)
	tests := []struct {
		name   string
		body   string
		status int
		msg    string // part of the message
	}{
		{"malformed JSON", `{"code": "x",}`, 400, "malformed JSON"},
		{"truncated JSON", `{"code": "x"`, 400, "malformed JSON"},
		{"empty body", ``, 400, "empty"},
		{"not an object", `["x"]`, 400, "JSON object"},
		{"trailing data", `{"code":"x"} {}`, 400, "after the JSON object"},
		{"unknown field", `{"code":"x","timeout_s":3}`, 400, `unknown field "timeout_s"`},
		{"wrong type", `{"code":"x","timeout":"3"}`, 400, `"timeout" must be a number, not a string`},
		{"wrong nested type", `{"code":"x","files":[{"path":3,"content":""}]}`, 400, `"files.path" must be a string`},
		{"wrong integer", `{"code":"x","memory_mb":1.5}`, 400, `"memory_mb" must be an integer`},
		{"bad base64", `{"code":"x","files":[{"path":"a","content":"!!"}]}`, 400, "base64"},
		{"bad time", `{"code":"x","deterministic":{"time":"yesterday"}}`, 400, "RFC 3339"},
		{"unknown runtime", `{"code":"x","runtime":"gpu"}`, 400, `unknown runtime "gpu"`},
		{"runtime not here", `{"code":"x","runtime":"heavy"}`, 503, "not available"},
		{"timeout above maximum", `{"code":"x","timeout":100000}`, 400, "maximum"},
		{"huge timeout", `{"code":"x","timeout":1e300}`, 400, "1e+300 s is far above"},
		{"negative timeout", `{"code":"x","timeout":-1}`, 400, "negative"},
		{"memory above maximum", `{"code":"x","memory_mb":1000000}`, 400, "maximum"},
		{"stdout limit above maximum", `{"code":"x","stdout_limit":1000000000}`, 400, "maximum"},
		{"empty code", `{"code":"  "}`, 400, "code is empty"},
		{"missing code", `{"runtime":"nano"}`, 400, "code is empty"},
		{"code too large", `{"code":"` + big + `"}`, 400, "above the limit"},
		{"too many files", `{"code":"x","files":[{"path":"a","content":""},{"path":"b","content":""},{"path":"c","content":""},{"path":"d","content":""}]}`, 400, "4 input files"},
		{"file path escapes", `{"code":"x","files":[{"path":"../../etc/passwd","content":""}]}`, 400, `".."`},
		{"file path empty", `{"code":"x","files":[{"path":"","content":""}]}`, 400, "invalid"},
		{"bad env name", `{"code":"x","env":{"A=B":"1"}}`, 400, "environment"},
		{"oversized body", `{"code":"` + strings.Repeat("y", testMaxBody) + `"}`, 413, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, _, b := e.do(t, "POST", "/v1/run", testKey, []byte(tt.body))
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, b)
			}
			eb := errorBody(t, b)
			wantCode := api.CodeInvalidRequest
			if tt.status == 503 {
				wantCode = api.CodeRuntimeUnavailable
			}
			if eb.Error.Code != wantCode || !strings.Contains(eb.Error.Message, tt.msg) {
				t.Errorf("error %+v, want code %s and message containing %q", eb.Error, wantCode, tt.msg)
			}
			if eb.Result != nil {
				t.Errorf("bad input carries a result: %+v", eb.Result)
			}
		})
	}
}

// An oversized body announced by Content-Length is refused before it is read, and one sent
// chunked (no length) is cut off at the limit; both get 413.
func TestOversizedChunkedBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := io.MultiReader(strings.NewReader(`{"code":"`), strings.NewReader(strings.Repeat("z", 2*testMaxBody)), strings.NewReader(`"}`))
	req, _ := http.NewRequest("POST", e.url+"/v1/run", body)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || errorBody(t, b).Error.Code != api.CodeInvalidRequest {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := []byte(`{"code":"x"}`)
	for _, tt := range []struct {
		name, method, path, key string
	}{
		{"run without key", "POST", "/v1/run", ""},
		{"run with wrong key", "POST", "/v1/run", "wrong"},
		{"run with key prefix", "POST", "/v1/run", testKey[:5]},
		{"sessions without key", "GET", "/v1/sessions", ""},
		{"session run without key", "POST", "/v1/sessions/x/run", ""},
		{"metrics without key", "GET", "/metrics", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, h, b := e.do(t, tt.method, tt.path, tt.key, body)
			if status != 401 {
				t.Fatalf("status %d, want 401: %s", status, b)
			}
			if eb := errorBody(t, b); eb.Error.Code != api.CodeUnauthorized || eb.Error.Hint == "" {
				t.Errorf("error %+v", eb.Error)
			}
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", h.Get("WWW-Authenticate"))
			}
		})
	}
	// Other schemes are refused too.
	req, _ := http.NewRequest("POST", e.url+"/v1/run", bytes.NewReader(body))
	req.SetBasicAuth("user", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("basic auth: status %d, want 401", resp.StatusCode)
	}
	// And the client maps 401 to *client.Error.
	bad, _ := client.New(e.url, "wrong")
	_, err = bad.Run(context.Background(), api.RunRequest{Code: "x"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeUnauthorized || ce.Status != 401 {
		t.Errorf("client error %v", err)
	}
}

func TestHealthNeedsNoKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	noKey, _ := client.New(e.url, "")
	h, err := noKey.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != api.HealthOK || h.Version != "1.2.3-test" || len(h.Runtimes) != 1 ||
		h.Runtimes[0].Name != "nano" || !h.Runtimes[0].OK || h.Runtimes[0].State != "2 of 2 workers free" {
		t.Errorf("health %+v", h)
	}
	setUnhealthy(e.rt)
	status, _, b := e.do(t, "GET", "/v1/health", "", nil)
	if status != 503 || !strings.Contains(string(b), `"unavailable"`) {
		t.Errorf("unhealthy runtime: status %d %s", status, b)
	}
	if h, err := noKey.Health(context.Background()); err != nil || h.Status != api.HealthUnavailable {
		t.Errorf("client health of an unavailable daemon: %+v %v", h, err)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	status, _, b := e.do(t, "GET", "/v1/nothing", testKey, nil)
	if status != 404 || errorBody(t, b).Error.Code != api.CodeNotFound {
		t.Errorf("unknown route: %d %s", status, b)
	}
	status, h, b := e.do(t, "GET", "/v1/run", testKey, nil)
	if status != 405 || errorBody(t, b).Error.Code != api.CodeInvalidRequest || h.Get("Allow") != "POST" {
		t.Errorf("wrong method: %d allow %q %s", status, h.Get("Allow"), b)
	}
	status, h, _ = e.do(t, "PUT", "/v1/sessions/abc", testKey, nil)
	if status != 405 || h.Get("Allow") != "GET, DELETE" {
		t.Errorf("wrong method on a session: %d allow %q", status, h.Get("Allow"))
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.c.Run(ctx, api.RunRequest{Code: "x"}); err != nil {
		t.Fatal(err)
	}
	_, _ = e.c.Run(ctx, api.RunRequest{Code: "raise"})
	_, _ = e.c.Run(ctx, api.RunRequest{Code: "timeout"})
	status, _, b := e.do(t, "GET", "/metrics", testKey, nil)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	for _, want := range []string{
		`agentbox_http_requests_total{method="POST",route="/v1/run",runtime="nano",status="200"} 2`,
		`agentbox_http_requests_total{method="POST",route="/v1/run",runtime="nano",status="408"} 1`,
		`agentbox_http_request_duration_seconds_bucket{method="POST",route="/v1/run",runtime="nano",status="200",le="+Inf"} 2`,
		`agentbox_runs_total{outcome="ok",runtime="nano",tenant=""} 1`,
		`agentbox_runs_total{outcome="exception",runtime="nano",tenant=""} 1`,
		`agentbox_runs_total{outcome="timeout",runtime="nano",tenant=""} 1`,
		`agentbox_run_duration_seconds_count{pool="warm",runtime="nano"} 2`,
		`agentbox_sessions_open 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s, err := e.c.CreateSession(ctx, api.CreateSessionRequest{Timeout: 5, MemoryMB: 128})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.Runtime != "nano" || s.Limits.Timeout != 5 || s.Limits.MemoryMB != 128 || s.IdleTimeout <= 0 {
		t.Errorf("session %+v", s)
	}
	if _, err := e.c.RunInSession(ctx, s.ID, api.RunRequest{Code: "x=42"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(x)"})
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("state did not survive: %+v %v", res, err)
	}
	list, err := e.c.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != s.ID || list[0].Runs != 2 {
		t.Errorf("list %+v %v", list, err)
	}
	got, err := e.c.GetSession(ctx, s.ID)
	if err != nil || got.ID != s.ID || got.Runs != 2 {
		t.Errorf("get %+v %v", got, err)
	}
	// A session run may set its timeout, not the session's other limits.
	_, err = e.c.RunInSession(ctx, s.ID, api.RunRequest{Code: "x", MemoryMB: 512})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeInvalidRequest || !strings.Contains(ce.Message, "memory_mb") {
		t.Errorf("memory in a session run: %v", err)
	}
	if err := e.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"get":   func() error { _, err := e.c.GetSession(ctx, s.ID); return err },
		"run":   func() error { _, err := e.c.RunInSession(ctx, s.ID, api.RunRequest{Code: "x"}); return err },
		"close": func() error { return e.c.CloseSession(ctx, s.ID) },
	} {
		err := call()
		if !errors.As(err, &ce) || ce.Code != api.CodeNotFound || ce.Status != 404 || !strings.Contains(ce.Message, s.ID) {
			t.Errorf("%s after close: %v, want not_found naming the session", name, err)
		}
	}
	if list, _ := e.c.ListSessions(ctx); len(list) != 0 {
		t.Errorf("sessions after close: %+v", list)
	}
	// An empty body creates a session with the defaults.
	status, _, b := e.do(t, "POST", "/v1/sessions", testKey, nil)
	if status != 201 {
		t.Errorf("create with empty body: %d %s", status, b)
	}
	status, _, b = e.do(t, "POST", "/v1/sessions", testKey, []byte(`{"memory_mb":"lots"}`))
	if status != 400 || !strings.Contains(errorBody(t, b).Error.Message, "memory_mb") {
		t.Errorf("create with a wrong type: %d %s", status, b)
	}
	status, _, b = e.do(t, "POST", "/v1/sessions", testKey, []byte(`{"env":{"":"x"}}`))
	if status != 400 {
		t.Errorf("create with a bad env name: %d %s", status, b)
	}
}

func TestLimitErrorKeepsPartialResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	status, _, b := e.do(t, "POST", "/v1/run", testKey, []byte(`{"code":"timeout","timeout":1}`))
	if status != 408 {
		t.Fatalf("status %d: %s", status, b)
	}
	eb := errorBody(t, b)
	if eb.Error.Code != api.CodeTimeout || eb.Error.Hint == "" || eb.Result == nil || eb.Result.Stdout != "partial\n" ||
		eb.Result.Routing.Tier != "nano" {
		t.Errorf("timeout body %s", b)
	}
	// The client hands the partial result over in *client.Error.
	_, err := e.c.Run(context.Background(), api.RunRequest{Code: "memory"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeMemoryLimit || ce.Status != 422 || ce.Result == nil ||
		ce.Result.Stdout != "allocating\n" || ce.RequestID == "" {
		t.Errorf("client error %#v", err)
	}
	if !strings.HasPrefix(err.Error(), "agentbox: memory_limit: ") {
		t.Errorf("error text %q", err)
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req, _ := http.NewRequest("POST", e.url+"/v1/run", strings.NewReader(`{"code":"crash"}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("X-Request-Id", "trace-me-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	eb := errorBody(t, b)
	if resp.StatusCode != 500 || eb.Error.Code != api.CodeInternal {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	if strings.Contains(string(b), "secret") || !strings.Contains(eb.Error.Message, "trace-me-1") ||
		resp.Header.Get("X-Request-Id") != "trace-me-1" {
		t.Errorf("internal error body %s", b)
	}
}

// A file's raw bytes meet the same body limit as JSON: over it, announced or chunked, the answer
// is 413 invalid_request before the engine is asked.
func TestOversizedFileBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, chunked := range []bool{false, true} {
		req, _ := http.NewRequest("PUT", e.url+"/v1/sessions/sess_x/files/content?path=big.bin",
			strings.NewReader(strings.Repeat("z", 2*testMaxBody)))
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || errorBody(t, b).Error.Code != api.CodeInvalidRequest {
			t.Errorf("chunked %v: status %d body %s", chunked, resp.StatusCode, b)
		}
	}
}
