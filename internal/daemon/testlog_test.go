package daemon_test

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// testLog is the log of a daemon a test starts: its warnings and errors go to the test's own log
// (shown when the test fails, or with -v), so a failure that the daemon saw coming names its
// cause in the test's output. AGENTBOX_TEST_LOG=debug writes every level.
func testLog(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if strings.EqualFold(os.Getenv("AGENTBOX_TEST_LOG"), "debug") {
		level = slog.LevelDebug
	}
	w := &testLogWriter{t: t}
	// Logging after the test has ended panics in package testing: what the daemon logs while it
	// is closed, or from a goroutine that outlives it, is dropped.
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log("daemon: " + string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
