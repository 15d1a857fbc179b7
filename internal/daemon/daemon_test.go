package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/worker"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	jail.MaybeInit()
	if len(os.Args) > 1 && os.Args[1] == nano.WorkerArg {
		os.Exit(worker.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

const key = "test-key-0123456789"

// start runs the whole daemon (real jailed nano workers, its real front doors on loopback) from the
// data directory `agentbox setup` filled.
// The heavy tier is off here; heavy_test.go starts a daemon with it.
func start(t *testing.T) (*client.Client, string) {
	t.Helper()
	return startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled = heavy.Off }))
	})
}

// mustConfigure fails the test when a tier's section could not be changed.
func mustConfigure(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startWith starts a daemon whose configuration edit changed. Per-node state (heavy sandboxes,
// artifacts) goes to the test's own directories; the built runtimes come from the data directory.
func startWith(t *testing.T, edit func(*config.Config)) (*client.Client, string) {
	t.Helper()
	testenv.RequireRoot(t)
	cfg := config.Default()
	cfg.Sessions.Dir = t.TempDir() // sessions that outlive the daemon: this test's own
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	stateDir := t.TempDir()
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) { h.StateDir = stateDir }))
	cfg.ArtifactsDir = t.TempDir()
	cfg.Audit.Dir = t.TempDir()
	cfg.VolumesDir = t.TempDir()
	edit(&cfg)
	log := testLog(t)
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		m.Close()
	})
	c, err := client.New(ts.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	return c, ts.URL
}

func TestDaemonEndToEnd(t *testing.T) {
	c, url := start(t)
	ctx := context.Background()

	t.Run("SeedExample", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import json\ndata = {\"status\": \"ok\"}\nprint(json.dumps(data))\n"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "{\"status\": \"ok\"}\n" || res.Runtime != "nano" || res.ExitCode != 0 {
			t.Fatalf("got %+v", res)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		start := time.Now()
		_, err := c.Run(ctx, api.RunRequest{Code: "while True: pass", Timeout: 1})
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Code != "timeout" || ae.Status != http.StatusRequestTimeout {
			t.Fatalf("got %v, want a timeout error", err)
		}
		if took := time.Since(start); took > 1100*time.Millisecond {
			t.Errorf("timeout answered after %v, want within 100 ms of the 1 s deadline", took)
		}
		h, err := c.Health(ctx)
		if err != nil || h.Status != "ok" {
			t.Fatalf("daemon unhealthy after a timeout: %+v %v", h, err)
		}
	})

	t.Run("Concurrent50", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res, err := c.Run(ctx, api.RunRequest{Code: fmt.Sprintf("print(%d ** 2)", i), Timeout: 60})
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("%d\n", i*i); res.Stdout != want {
					errs <- fmt.Errorf("request %d: stdout %q, want %q", i, res.Stdout, want)
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("Session", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "n = 20"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(n + 1)"})
		if err != nil || res.Stdout != "21\n" {
			t.Fatalf("session state: %+v %v", res, err)
		}
		other, err := c.Run(ctx, api.RunRequest{Code: "print('n' in globals())"})
		if err != nil || other.Stdout != "False\n" {
			t.Fatalf("a one-shot run saw the session's state: %+v %v", other, err)
		}
	})

	t.Run("NoToken", func(t *testing.T) {
		resp, err := http.Post(url+"/v1/run", "application/json", strings.NewReader(`{"code":"print(1)"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d without a token, want 401", resp.StatusCode)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		for name, body := range map[string]string{
			"malformed":      `{"code": `,
			"unknown field":  `{"code": "print(1)", "cod": 1}`,
			"wrong type":     `{"code": 42}`,
			"unknown tier":   `{"code": "print(1)", "runtime": "gpu"}`,
			"above maximum":  `{"code": "print(1)", "timeout": 100000}`,
			"memory too big": `{"code": "print(1)", "memory_mb": 1000000}`,
		} {
			req, _ := http.NewRequest("POST", url+"/v1/run", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_request"`) {
				t.Errorf("%s: status %d body %s, want 400 invalid_request", name, resp.StatusCode, b)
			}
		}
		req, _ := http.NewRequest("POST", url+"/v1/run", strings.NewReader(`{"code": "`+strings.Repeat("x", 65<<20)+`"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized body: status %d, want 413", resp.StatusCode)
		}
	})
}
