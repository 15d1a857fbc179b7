package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// sharedRecords stands for the cluster's shared store (package sharedstore has the real one and
// its own tests): records with an owner each.
type sharedRecords struct {
	mu       sync.Mutex
	data     map[string][]byte
	owner    map[string]string
	released map[string]bool
}

func newSharedRecords() *sharedRecords {
	return &sharedRecords{data: map[string][]byte{}, owner: map[string]string{}, released: map[string]bool{}}
}

// claim makes node the owner of id and returns its record.
func (r *sharedRecords) claim(id, node string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owner[id] = node
	r.released[id] = false
	return r.data[id]
}

// nodeRecords is one node's view of them.
type nodeRecords struct {
	*sharedRecords
	node string
}

var _ sandbox.SessionRecords = nodeRecords{}

func (n nodeRecords) Save(id string, b []byte, _ []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if o, ok := n.owner[id]; ok && o != n.node {
		return fmt.Errorf("session %s: %w", id, sandbox.ErrMoved)
	}
	n.owner[id], n.data[id] = n.node, b
	return nil
}
func (n nodeRecords) Remove(id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.owner[id] == n.node {
		delete(n.data, id)
		delete(n.owner, id)
	}
	return nil
}
func (n nodeRecords) Release(id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.released[id] = true
	return nil
}
func (n nodeRecords) Load() (map[string][]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string][]byte{}
	for id, o := range n.owner {
		if o == n.node {
			out[id] = n.data[id]
		}
	}
	return out, nil
}

func nodeManager(t *testing.T, tier *counterTier, recs *sharedRecords, node string) *sandbox.Manager {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, Records: nodeRecords{recs, node}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

type noticeSink struct {
	events []string
}

func (s *noticeSink) Write(stream sandbox.Stream, p []byte) {
	s.events = append(s.events, string(stream)+":"+string(p))
}
func (s *noticeSink) Notice(n sandbox.Notice) { s.events = append(s.events, "notice:"+n.Kind) }

// A session another node adopts resumes from its latest durable step; the first run (streamed
// or not) carries the notice, once; the node it left lets it go at its next write.
func TestAdoptResumesAtLatestDurableStep(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	recs := newSharedRecords()
	ma := nodeManager(t, tier, recs, "a")
	va := ma.As(sandbox.Caller{Tenant: "acme"})
	info, err := va.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	addRun(t, va, id, 5)
	steps := waitDurable(t, va, id)
	durable := steps[0].ID
	// The next step stays in memory only (as a heavy step whose checkpoint had not run yet when
	// its node died).
	tier.mu.Lock()
	tier.memoryOnly = true
	tier.mu.Unlock()
	second := addRun(t, va, id, 2).Step
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		recs.mu.Lock()
		saved := strings.Contains(string(recs.data[id]), `"head":"`+second+`"`)
		recs.mu.Unlock()
		if saved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second step's record was not saved")
		}
	}

	mb := nodeManager(t, tier, recs, "b")
	vb := mb.As(sandbox.Caller{Tenant: "acme"})
	moved, err := mb.Adopt(id, recs.claim(id, "b"), sandbox.Notice{FromNode: "a", ToNode: "b", Reason: "node a is gone"})
	if err != nil {
		t.Fatal(err)
	}
	if moved.Head != durable || moved.Tenant != "acme" {
		t.Fatalf("adopted at %s (tenant %s), want the durable step %s", moved.Head, moved.Tenant, durable)
	}
	if _, err := ma.As(sandbox.Caller{Tenant: "other"}).Session(id); err == nil {
		t.Fatal("another tenant sees the session")
	}
	sink := &noticeSink{}
	res, err := vb.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: "add 0", Output: sink})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "5\n" {
		t.Fatalf("after the move the session holds %q, want 5 (its durable step)", res.Stdout)
	}
	if n := res.Notice; n == nil || n.Kind != sandbox.NoticeSessionMoved || n.FromNode != "a" || n.ToNode != "b" || n.Step != durable {
		t.Fatalf("notice: %+v", res.Notice)
	}
	if len(sink.events) == 0 || sink.events[0] != "notice:session_moved" {
		t.Fatalf("the stream did not start with the notice: %v", sink.events)
	}
	if again := addRun(t, vb, id, 1); again.Notice != nil || again.Stdout != "6\n" {
		t.Fatalf("the second run after the move: %q, notice %+v", again.Stdout, again.Notice)
	}
	// Node a comes back to life: its next write of the session finds it moved, and lets it go.
	tier.mu.Lock()
	tier.memoryOnly = false
	tier.mu.Unlock()
	_, _ = va.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: "add 100"})
	// (The record is written behind the run: wait for it, up to a bound that only a hang meets.)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := ma.Session(id); err != nil {
			break
		}
	}
	if _, err := ma.Session(id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("node a still holds the moved session: %v", err)
	}
	if again := addRun(t, vb, id, 1); again.Stdout != "7\n" {
		t.Fatalf("node a's stale run reached the session: %q", again.Stdout)
	}
	if _, err := mb.Adopt(id, recs.claim(id, "b"), sandbox.Notice{FromNode: "a"}); err != nil {
		t.Fatalf("adopting a session held already: %v", err)
	}
	if again := addRun(t, vb, id, 0); again.Notice != nil {
		t.Fatal("a second adoption by the same node gave a second notice")
	}
}

// Drain pauses each session, releases its record and lets it go; another node adopts it with
// its state, and the draining node takes no new sessions.
func TestDrainReleasesSessions(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	recs := newSharedRecords()
	ma := nodeManager(t, tier, recs, "a")
	info, err := ma.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	v := ma.As(sandbox.Caller{})
	addRun(t, v, info.ID, 4)
	released, err := ma.Drain(context.Background())
	if err != nil || len(released) != 1 || released[0] != info.ID {
		t.Fatalf("drain: %v %v", released, err)
	}
	if !ma.Draining() || !recs.released[info.ID] {
		t.Fatal("the node does not say it drains, or the record was not released")
	}
	if _, err := ma.Session(info.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the drained node still holds the session: %v", err)
	}
	if _, err := ma.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"}); sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable {
		t.Fatalf("a draining node took a new session: %v", err)
	}
	mb := nodeManager(t, tier, recs, "b")
	if _, err := mb.Adopt(info.ID, recs.claim(info.ID, "b"), sandbox.Notice{FromNode: "a", Reason: "node a drained"}); err != nil {
		t.Fatal(err)
	}
	if res := addRun(t, mb.As(sandbox.Caller{}), info.ID, 1); res.Stdout != "5\n" || res.Notice == nil {
		t.Fatalf("after the drain: %q, notice %+v", res.Stdout, res.Notice)
	}
}
