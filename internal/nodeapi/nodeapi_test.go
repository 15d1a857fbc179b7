package nodeapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/nodeapi"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// fakeEngine reports a fixed load.
type fakeEngine struct{}

// Interface guards.
var _ nodeapi.Engine = fakeEngine{}

func (fakeEngine) Load() ([]sandbox.TierLoad, int, int) {
	return []sandbox.TierLoad{
		{Tier: "nano", WarmFree: map[string]int{"default": 3}, Sessions: 1},
		{Tier: "heavy", WarmFree: map[string]int{"python-datascience": 2}, Sessions: 4},
	}, 5, 32
}

func TestNodeInfo(t *testing.T) {
	t.Parallel()
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	tenantKey, _, err := auth.CreateKey(keysFile, "acme", "bot", []auth.Scope{auth.ScopeRun, auth.ScopeSessions}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.NewKeys("boot-key", keysFile)
	if err != nil {
		t.Fatal(err)
	}
	h := nodeapi.New(nodeapi.Options{ID: "n1", Addr: "http://127.0.0.1:1", Version: "v1", Engine: fakeEngine{}, Keys: keys, Token: "cluster-tok"})
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, tc := range []struct {
		name, key string
		status    int
	}{
		{"cluster token", "cluster-tok", 200},
		{"admin key", "boot-key", 200},
		{"tenant key", tenantKey, 403},
		{"no key", "", 401},
		{"wrong key", "nope", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/node", nil)
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				var e struct{ Error struct{ Code string } }
				if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error.Code == "" {
					t.Fatalf("refusal without a typed error body")
				}
				return
			}
			var info cluster.NodeInfo
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
			if info.ID != "n1" || info.Role != "node" || info.Version != "v1" || info.Sessions != 5 ||
				info.Tiers["nano"].Warm() != 3 || info.Tiers["heavy"].WarmFree["python-datascience"] != 2 ||
				info.Tiers["heavy"].Sessions != 4 || info.Tiers["heavy"].MaxSessions != 32 || info.MemAvailableBytes <= 0 {
				t.Fatalf("info %+v", info)
			}
		})
	}
}
