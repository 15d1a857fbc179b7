package nomad

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A fake Nomad HTTP API (a unit test of the code around the client): one registration whose
// checks pass, then answer too slowly, then cannot be read because the allocation's client is
// gone, as Nomad says it ("No path to node").
func TestHealthFollowsNomadsAnswersNotItsSilence(t *testing.T) {
	var mode atomic.Int32 // 0 passing, 1 slow, 2 client gone
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/service/agentbox-node":
			json.NewEncoder(w).Encode([]api.ServiceRegistration{{ServiceName: "agentbox-node", Namespace: "default",
				NodeID: "0b4f2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b", AllocID: "a1", Address: "10.0.0.5", Port: 8421}})
		case "/v1/client/allocation/a1/checks":
			switch mode.Load() {
			case 1:
				select {
				case <-r.Context().Done():
				case <-time.After(2 * time.Second):
				}
				return
			case 2:
				http.Error(w, "No path to node", http.StatusInternalServerError)
				return
			}
			json.NewEncoder(w).Encode(api.AllocCheckStatuses{"c1": {Service: "agentbox-node", Status: "success"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	conf := api.DefaultConfig()
	conf.Address = srv.URL
	c, err := api.NewClient(conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := New(ctx, Options{Service: "agentbox-node", Client: c, Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	healthy := func() bool {
		t.Helper()
		n, err := d.Nodes(ctx)
		if err != nil || len(n) != 1 {
			t.Fatalf("Nodes = %+v, %v; want one node", n, err)
		}
		if n[0].ID != "0b4f2a8e1c3d4e5f8a9b0c1d2e3f4a5b" || n[0].Addr != "http://10.0.0.5:8421" {
			t.Fatalf("node = %+v", n[0])
		}
		return n[0].Healthy
	}
	waitFor(t, 5*time.Second, "the node healthy", healthy)
	mode.Store(1)
	time.Sleep(600 * time.Millisecond) // several reads whose checks time out
	if !healthy() {
		t.Error("a node went unhealthy because Nomad answered its checks slowly")
	}
	mode.Store(2)
	waitFor(t, 5*time.Second, "the node unhealthy once Nomad says its client is gone", func() bool { return !healthy() })
}
