package cli_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/cli"
)

// syncBuffer is written by the daemon's goroutines and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve starts the daemon with a fake engine, calls use with its URL, stops it and returns its
// stderr.
func serve(t *testing.T, dataDir string, use func(url string)) string {
	t.Helper()
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- cli.Serve(ctx, cli.ServeOptions{
			Listen:     "127.0.0.1:0",
			DataDir:    dataDir,
			Stderr:     &stderr,
			NewManager: fakeFactory(t, nil),
			Ready:      func(a net.Addr) { ready <- "http://" + a.String() },
		})
	}()
	select {
	case url := <-ready:
		use(url)
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not become ready")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	return stderr.String()
}

func TestServeCreatesAndReusesKey(t *testing.T) {
	t.Setenv("AGENTBOX_API_KEY", "")
	t.Setenv("AGENTBOX_LISTEN", "")
	dir := filepath.Join(t.TempDir(), "data")
	keyPath := filepath.Join(dir, "api_key")
	var first string
	log := serve(t, dir, func(url string) {
		b, err := os.ReadFile(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		first = strings.TrimSpace(string(b))
		c, _ := client.New(url, first)
		res, err := c.Run(context.Background(), api.RunRequest{Code: "x"})
		if err != nil || res.Stdout != "ran: x" {
			t.Errorf("run with the created key: %+v %v", res, err)
		}
		h, err := c.Health(context.Background())
		if err != nil || h.Status != "ok" {
			t.Errorf("health %+v %v", h, err)
		}
	})
	if !strings.Contains(log, "created a new API key in "+keyPath) || !strings.Contains(log, "listening on http://127.0.0.1:") {
		t.Errorf("startup lines: %s", log)
	}
	if strings.Contains(log, first) {
		t.Errorf("the key itself was printed")
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, keyPath: 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	log = serve(t, dir, func(string) {})
	b, _ := os.ReadFile(keyPath)
	if strings.TrimSpace(string(b)) != first || !strings.Contains(log, "API key in "+keyPath) {
		t.Errorf("second start did not reuse the key: %s", log)
	}
}

func TestServeUsesKeyFromEnvironment(t *testing.T) {
	t.Setenv("AGENTBOX_API_KEY", "from-env")
	t.Setenv("AGENTBOX_LISTEN", "")
	dir := t.TempDir()
	log := serve(t, dir, func(url string) {
		c, _ := client.New(url, "from-env")
		if _, err := c.ListSessions(context.Background()); err != nil {
			t.Errorf("key from the environment: %v", err)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "api_key")); err == nil {
		t.Errorf("a key file was written although AGENTBOX_API_KEY is set")
	}
	if !strings.Contains(log, "AGENTBOX_API_KEY") {
		t.Errorf("log: %s", log)
	}
}

func TestServeRejectsBusyAddress(t *testing.T) {
	t.Setenv("AGENTBOX_API_KEY", "k")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	called := false
	err = cli.Serve(context.Background(), cli.ServeOptions{Listen: ln.Addr().String(), DataDir: t.TempDir(),
		Stderr: &bytes.Buffer{}, NewManager: fakeFactory(t, &called)})
	if err == nil || called {
		t.Errorf("busy address: err %v, engine started %v", err, called)
	}
}
