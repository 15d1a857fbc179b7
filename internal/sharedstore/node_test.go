package sharedstore

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A node's view writes its sessions at the epoch it owns them at; once another node claims one,
// its writes are sandbox.ErrMoved and it no longer loads it; a released session is nobody's to
// load until claimed.
func TestNodeRecords(t *testing.T) {
	forEachStore(t, testNodeRecords)
}

func testNodeRecords(t *testing.T, newStore func() Store) {
	ctx := context.Background()
	d := newStore()
	a, b := NewNodeRecords(d, "a", "http://a"), NewNodeRecords(d, "b", "http://b")
	if err := a.Save("sb_a-1", []byte(`{"v":1}`), []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Save("sb_a-1", []byte(`{"v":2}`), []string{"m2"}); err != nil {
		t.Fatal(err)
	}
	rec, err := d.Get(ctx, "sb_a-1")
	if err != nil || rec.Owner != "a" || rec.Epoch != 1 || string(rec.Data) != `{"v":2}` || rec.Refs[0] != "m2" || rec.Addr != "http://a" {
		t.Fatalf("record: %+v %v", rec, err)
	}
	// A node restarted (a fresh view) finds its own sessions and writes them at their epoch.
	a2 := NewNodeRecords(d, "a", "http://a")
	if got, _ := a2.Load(); string(got["sb_a-1"]) != `{"v":2}` {
		t.Fatalf("load after a restart: %v", got)
	}
	if _, err := b.Claim(ctx, "sb_a-1", rec.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := a2.Save("sb_a-1", []byte(`{"v":"stale"}`), nil); !errors.Is(err, sandbox.ErrMoved) {
		t.Fatalf("a stale owner's save: %v", err)
	}
	if err := a.Remove("sb_a-1"); !errors.Is(err, sandbox.ErrMoved) {
		t.Fatalf("a stale owner's remove: %v", err)
	}
	if got, _ := a.Load(); len(got) != 0 {
		t.Fatalf("node a loads a session node b owns: %v", got)
	}
	if err := b.Save("sb_a-1", []byte(`{"v":3}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Release("sb_a-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Load(); len(got) != 0 {
		t.Fatalf("a released session is loaded: %v", got)
	}
	if rec, _ := d.Get(ctx, "sb_a-1"); !rec.Released || string(rec.Data) != `{"v":3}` {
		t.Fatalf("released record: %+v", rec)
	}
	// Node a takes it back (a claim), then closes it.
	rec, _ = d.Get(ctx, "sb_a-1")
	if _, err := a.Claim(ctx, "sb_a-1", rec.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove("sb_a-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, "sb_a-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after remove: %v", err)
	}
}
