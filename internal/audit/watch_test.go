package audit

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatchSession: a watch collects the ids of its session's records written between its start
// and its stop, in order, and no other session's; starting and stopping one never waits for a
// record being written (the log's lock held, as by a write the host is slow to finish).
func TestWatchSession(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "audit"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	add := func(session string) {
		t.Helper()
		if err := l.Append(ctx, Record{Kind: KindSessionCreate, Session: session, Decision: "allow"}); err != nil {
			t.Fatal(err)
		}
	}
	add("sb_a") // 0: before the watch
	stop := l.WatchSession("sb_a")
	add("sb_a") // 1
	add("sb_b") // 2: another session's
	add("sb_a") // 3
	if got := stop(); !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("watched %v, want [1 3]", got)
	}
	add("sb_a") // 4: after the stop

	// A record being written holds the log's lock: a watch starts and stops meanwhile.
	l.mu.Lock()
	done := make(chan []int64)
	go func() { done <- l.WatchSession("sb_c")() }()
	select {
	case got := <-done:
		if len(got) != 0 {
			t.Errorf("an empty watch returned %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Error("starting and stopping a watch waited for the log's lock")
	}
	l.mu.Unlock()
}
