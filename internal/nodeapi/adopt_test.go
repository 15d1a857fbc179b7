package nodeapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/nodeapi"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
)

// fakeMover is a Manager that holds adopted sessions by id.
type fakeMover struct {
	mu       sync.Mutex
	held     map[string]sandbox.Notice
	adopted  int
	draining bool
}

// Interface guards.
var _ nodeapi.Mover = (*fakeMover)(nil)

func (f *fakeMover) Adopt(id string, _ []byte, n sandbox.Notice) (sandbox.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[id] = n
	f.adopted++
	return sandbox.SessionInfo{ID: id, Head: "st_1"}, nil
}
func (f *fakeMover) Drain(context.Context) ([]string, error) { return nil, nil }
func (f *fakeMover) Draining() bool                          { return f.draining }
func (f *fakeMover) Session(id string) (sandbox.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.held[id]; ok {
		return sandbox.SessionInfo{ID: id, Head: "st_1"}, nil
	}
	return sandbox.SessionInfo{}, sandbox.ErrNotFound
}

func adoptNode(t *testing.T, store *sharedstore.Dir, id, addr string) (*nodeapi.Handler, *fakeMover) {
	t.Helper()
	keys, err := auth.NewKeys("boot-key", "")
	if err != nil {
		t.Fatal(err)
	}
	mv := &fakeMover{held: map[string]sandbox.Notice{}}
	h := nodeapi.New(nodeapi.Options{ID: id, Addr: addr, Keys: keys, Token: "tok", Mover: mv,
		Owners: sharedstore.NewNodeRecords(store, id, addr)})
	return h, mv
}

// Of nodes adopting one session at once (several calls each), exactly one takes it, once, and
// every answer names it.
func TestAdoptOneWinnerAcrossNodes(t *testing.T) {
	t.Parallel()
	store, err := sharedstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // the owner's address refuses connections
	if _, err := store.Create(context.Background(), sharedstore.Record{Session: "sb_a-1", Owner: "a", Addr: gone.URL, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	type node struct {
		h  *nodeapi.Handler
		mv *fakeMover
	}
	var nodes []node
	for _, id := range []string{"b", "c", "d"} {
		// Each node is up at its address: a node that lost the race asks the winner.
		var h *nodeapi.Handler
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		var mv *fakeMover
		h, mv = adoptNode(t, store, id, srv.URL)
		nodes = append(nodes, node{h, mv})
	}
	var wg sync.WaitGroup
	answers := make(chan cluster.AdoptResult, 12)
	for _, n := range nodes {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := n.h.Adopt(context.Background(), "sb_a-1", "")
				if err != nil {
					t.Error(err)
					return
				}
				answers <- res
			}()
		}
	}
	wg.Wait()
	close(answers)
	adopted, owners := 0, map[string]bool{}
	for a := range answers {
		owners[a.Owner] = true
		if a.Adopted {
			adopted++
		}
	}
	total := 0
	for _, n := range nodes {
		total += n.mv.adopted
	}
	if adopted != 1 || total != 1 || len(owners) != 1 {
		t.Fatalf("adopted %d times (%d in managers), owners named %v", adopted, total, owners)
	}
	rec, _ := store.Get(context.Background(), "sb_a-1")
	if !owners[rec.Owner] || rec.Epoch != 2 {
		t.Fatalf("the record: %+v", rec)
	}
	for _, n := range nodes {
		for _, notice := range n.mv.held {
			if notice.Kind != sandbox.NoticeSessionMoved || notice.FromNode != "a" || notice.Reason != "node a is gone" {
				t.Fatalf("notice %+v", notice)
			}
		}
	}
}

// An owner that answers keeps its session (the caller is told where it is); one that says it
// drains gives it up.
func TestAdoptAsksTheOwner(t *testing.T) {
	t.Parallel()
	store, err := sharedstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	draining := false
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		nodeapi.WriteJSON(w, http.StatusOK, cluster.NodeInfo{ID: "a", Draining: draining})
	}))
	defer owner.Close()
	if _, err := store.Create(context.Background(), sharedstore.Record{Session: "sb_a-2", Owner: "a", Addr: owner.URL}); err != nil {
		t.Fatal(err)
	}
	h, mv := adoptNode(t, store, "b", "http://b")
	res, err := h.Adopt(context.Background(), "sb_a-2", "")
	if err != nil || res.Adopted || res.Owner != "a" || res.Addr != owner.URL || mv.adopted != 0 {
		t.Fatalf("adopt while the owner is up: %+v %v", res, err)
	}
	draining = true
	res, err = h.Adopt(context.Background(), "sb_a-2", "")
	if err != nil || !res.Adopted || res.Owner != "b" || mv.held["sb_a-2"].Reason != "node a is draining" {
		t.Fatalf("adopt while the owner drains: %+v %v %+v", res, err, mv.held)
	}
	if _, err := h.Adopt(context.Background(), "sb_nope-1", ""); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("adopting an unknown session: %v", err)
	}
}

// Adopting on behalf of a client (the gateway's For): a session of another tenant is not_found, as
// one that does not exist, whether its owner is gone, alive or this node, and nothing moves; its
// own tenant (or an admin) adopts it.
func TestAdoptOnlyForTheOwner(t *testing.T) {
	t.Parallel()
	store, err := sharedstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	alive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nodeapi.WriteJSON(w, http.StatusOK, cluster.NodeInfo{ID: "c"})
	}))
	defer alive.Close()
	ctx := context.Background()
	for id, addr := range map[string]string{"sb_a-1": gone.URL, "sb_c-1": alive.URL} {
		if _, err := store.Create(ctx, sharedstore.Record{Session: id, Owner: id[3:4], Addr: addr,
			Data: json.RawMessage(`{"info":{"id":"` + id + `","tenant":"acme"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	h, mv := adoptNode(t, store, "b", "http://b")
	stranger := &cluster.AdoptCaller{Tenant: "umbrella"}
	_, missing := h.AdoptFor(ctx, cluster.AdoptRequest{Session: "sb_a-404", For: stranger})
	for _, id := range []string{"sb_a-1", "sb_c-1"} {
		res, err := h.AdoptFor(ctx, cluster.AdoptRequest{Session: id, For: stranger})
		if sandbox.KindOf(err) != sandbox.KindNotFound || res.Owner != "" ||
			strings.ReplaceAll(err.Error(), id, "ID") != strings.ReplaceAll(missing.Error(), "sb_a-404", "ID") {
			t.Fatalf("another tenant adopting %s: %+v %v, want not_found as for a missing session (%v)", id, res, err, missing)
		}
		if rec, _ := store.Get(ctx, id); rec.Epoch != 1 || rec.Owner != id[3:4] {
			t.Fatalf("%s moved on another tenant's request: %+v", id, rec)
		}
	}
	if mv.adopted != 0 {
		t.Fatalf("the Manager adopted %d sessions for another tenant", mv.adopted)
	}
	res, err := h.AdoptFor(ctx, cluster.AdoptRequest{Session: "sb_c-1", For: &cluster.AdoptCaller{Tenant: "acme"}})
	if err != nil || res.Owner != "c" || res.Adopted {
		t.Fatalf("the owner asking for a session whose node is alive: %+v %v, want its owner c", res, err)
	}
	res, err = h.AdoptFor(ctx, cluster.AdoptRequest{Session: "sb_a-1", For: &cluster.AdoptCaller{Tenant: "acme"}})
	if err != nil || !res.Adopted || res.Owner != "b" {
		t.Fatalf("the owner adopting: %+v %v", res, err)
	}
	// Held here now: still not the stranger's; an admin's.
	if _, err := h.AdoptFor(ctx, cluster.AdoptRequest{Session: "sb_a-1", For: stranger}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("another tenant asking for a session this node holds: %v", err)
	}
	if res, err := h.AdoptFor(ctx, cluster.AdoptRequest{Session: "sb_a-1", For: &cluster.AdoptCaller{Admin: true}}); err != nil || res.Owner != "b" {
		t.Fatalf("an admin: %+v %v", res, err)
	}
}
