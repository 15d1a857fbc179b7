package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/daemon"
)

// slowDoor stands in for a front door whose requests take a while, as runs do: GET /sleep?d=DUR
// answers "ok" after DUR, or stops when its request's context ends first and says so on stopped.
// That a run through the HTTP API does stop with its request's context is httpapi's
// TestRunStopsWithItsRequest; the lifecycle tested here is the listener's, whatever door serves.
func slowDoor(stopped chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		select {
		case <-time.After(d):
			fmt.Fprintln(w, "ok")
		case <-r.Context().Done():
			if stopped != nil {
				stopped <- r.Context().Err()
			}
			w.WriteHeader(499)
		}
	})
}

// get fetches url and returns its status and body.
func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	doors := daemon.NewFrontDoorsFor(slowDoor(nil), daemon.FrontDoorOptions{Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: 5 * time.Second})
	hs := httptest.NewUnstartedServer(nil) // only for its loopback listener
	ln := hs.Listener
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- doors.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	ran := make(chan error, 1)
	go func() {
		status, body, err := get(url + "/sleep?d=300ms")
		if err == nil && (status != 200 || body != "ok\n") {
			err = fmt.Errorf("wrong answer %d %q", status, body)
		}
		ran <- err
	}()
	time.Sleep(100 * time.Millisecond) // the request is in flight
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("a request in flight at shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, _, err := get(url + "/sleep"); err == nil {
		t.Errorf("the server still answers after shutdown")
	}
}

func TestServeStopsRunsAfterTheBound(t *testing.T) {
	t.Parallel()
	stopped := make(chan error, 1)
	doors := daemon.NewFrontDoorsFor(slowDoor(stopped), daemon.FrontDoorOptions{Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: 100 * time.Millisecond})
	ln := httptest.NewUnstartedServer(nil).Listener
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- doors.Serve(ctx, ln) }()
	ran := make(chan error, 1)
	go func() {
		status, _, err := get("http://" + ln.Addr().String() + "/sleep?d=1m")
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d", status)
		}
		ran <- err
	}()
	time.Sleep(100 * time.Millisecond)
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
		t.Errorf("a request past the shutdown bound finished normally")
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request's context ended with %v, want canceled", err)
		}
	default:
		t.Errorf("the request's context did not end: its run would go on")
	}
}

// TestMounts holds the listener's paths to what they were before there was more than one front
// door: every path reaches the HTTP API as the client sent it, unclean ones included (the API's
// router answers those, with its request id and log line), until /mcp and /ui are mounted.
func TestMounts(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "api %s %s", r.Method, r.URL.Path)
	})
	h := daemon.MountAll(api)
	for _, path := range []string{
		"/v1/run", "/v1/health", "/v1/sessions/abc/files/content", "/metrics",
		"/v1", "/", "/nothing", "/metrics/", "//v1/run", "/v1/../metrics", "/mcp", "/ui/",
	} {
		t.Run(path, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "http://agentbox.test/", nil)
			r.URL.Path = path
			h.ServeHTTP(w, r)
			if got, want := w.Body.String(), "api GET "+path; w.Code != 200 || got != want {
				t.Errorf("got %d %q, want %q", w.Code, got, want)
			}
		})
	}
}
