package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// sleeper is a runtime whose runs of "sleep:DUR" answer "ok" after DUR, or stop when their
// context ends first, as a run stopped at its deadline does.
func sleeper() *runtimetest.Fake { return sleeperStarting(nil) }

// sleeperStarting is a sleeper that tells started when a run reaches it (if started is not nil),
// so a test acts on a run in flight when it is, not after a guess of how long the request takes.
func sleeperStarting(started chan<- struct{}) *runtimetest.Fake {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: "nano", Sessions: true})
	f.Answer = func(ctx context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		if started != nil {
			started <- struct{}{}
		}
		d, _ := time.ParseDuration(strings.TrimPrefix(req.Code, "sleep:"))
		select {
		case <-time.After(d):
			return &sandbox.Result{Stdout: "ok\n"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return f
}

// sleepyDoors builds the daemon's front doors over a Manager of one sleeper, which sends on
// started (buffered by the caller) when a run reaches it.
func sleepyDoors(t *testing.T, shutdown time.Duration, started chan<- struct{}) *daemon.FrontDoors {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{sleeperStarting(started)}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log, ShutdownTimeout: shutdown})
	if err != nil {
		t.Fatal(err)
	}
	return doors
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	doors := sleepyDoors(t, 5*time.Second, started)
	hs := httptest.NewUnstartedServer(nil) // only for its loopback listener
	ln := hs.Listener
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- doors.Serve(ctx, ln) }()
	c, _ := client.New("http://"+ln.Addr().String(), key)

	ran := make(chan error, 1)
	go func() {
		res, err := c.Run(context.Background(), api.RunRequest{Code: "sleep:300ms"})
		if err == nil && res.Stdout != "ok\n" {
			err = errors.New("wrong output " + res.Stdout)
		}
		ran <- err
	}()
	<-started // the run is in flight (a fixed sleep here let a slow request meet a closed listener)
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("a run in flight at shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := c.Health(context.Background()); err == nil {
		t.Errorf("the server still answers after shutdown")
	}
}

func TestServeStopsRunsAfterTheBound(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	doors := sleepyDoors(t, 100*time.Millisecond, started)
	ln := httptest.NewUnstartedServer(nil).Listener
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- doors.Serve(ctx, ln) }()
	c, _ := client.New("http://"+ln.Addr().String(), key)
	ran := make(chan error, 1)
	go func() { _, err := c.Run(context.Background(), api.RunRequest{Code: "sleep:1m"}); ran <- err }()
	<-started // in flight: a run refused at a closed listener would fail as well, and prove nothing
	start := time.Now()
	cancel()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its shutdown bound")
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if err := <-ran; err == nil {
		t.Errorf("a run past the shutdown bound finished normally")
	}
}

// TestMounts holds the listener's paths: /mcp reaches the MCP front door, and every other path
// reaches the HTTP API as the client sent it, unclean ones included (the API's router answers
// those, with its request id and log line), until /ui is mounted.
func TestMounts(t *testing.T) {
	t.Parallel()
	door := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s", name, r.Method, r.URL.Path)
		})
	}
	h := daemon.MountAll(door("api"), door("mcp"), door("ui"))
	for _, path := range []string{
		"/v1/run", "/v1/health", "/v1/sessions/abc/files/content", "/metrics",
		"/v1", "/", "/nothing", "/metrics/", "//v1/run", "/v1/../metrics", "/mcp", "/mcp/", "/mcpx", "/ui/", "/ui", "/ui/sessions", "/uix",
	} {
		t.Run(path, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "http://agentbox.test/", nil)
			r.URL.Path = path
			h.ServeHTTP(w, r)
			want := "api GET " + path
			switch {
			case path == "/mcp":
				want = "mcp GET " + path
			case path == "/ui" || strings.HasPrefix(path, "/ui/"):
				want = "ui GET " + path
			}
			if got := w.Body.String(); w.Code != 200 || got != want {
				t.Errorf("got %d %q, want %q", w.Code, got, want)
			}
		})
	}
}

// TestE2BMountedByHost: on the main listener the E2B front door's names (api.DOMAIN,
// PORT-ID.DOMAIN) go to it, every other name to agentbox's own front doors.
func TestE2BMountedByHost(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{sleeper()}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log,
		E2B: daemon.E2BOptions{Enabled: true, Domain: "e2b.test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { doors.Close() })
	for _, tt := range []struct{ host, path, want string }{
		{"api.e2b.test", "/health", `{"message":"ok"}`},
		{"api.e2b.test:443", "/v1/health", `"code":501`}, // E2B's names are E2B's, whatever the path
		{"49983-sbnope.e2b.test", "/health", `"code":502`},
		{"127.0.0.1:8420", "/v1/health", `"status"`},
		{"agentbox.test", "/health", `"not_found"`},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "http://"+tt.host+tt.path, nil)
		r.Header.Set("X-API-Key", key)
		doors.ServeHTTP(w, r)
		if !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("%s%s: %d %s, want %s", tt.host, tt.path, w.Code, w.Body.String(), tt.want)
		}
	}
}
