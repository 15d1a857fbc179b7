package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// The key calls send what the spec says and decode what the daemon answers.
func TestKeyCalls(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 22, 8, 40, 0, 0, time.UTC)
	rec := api.Key{ID: "0123456789abcdef", Tenant: "acme", Agent: "ci-bot", Scopes: []string{"run"}, Created: created}
	var got []string
	var body api.CreateKeyRequest
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/keys":
			json.NewEncoder(w).Encode(api.KeyList{Keys: []api.Key{rec}})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/keys":
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &body); err != nil {
				t.Error(err)
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(api.CreatedKey{Key: "abt_0123456789abcdef.secret", Record: rec})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/keys/0123456789abcdef/rotate":
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(api.CreatedKey{Key: "abt_fedcba9876543210.secret", Record: api.Key{ID: "fedcba9876543210", Tenant: "acme"}})
		case r.Method == http.MethodDelete && r.URL.Path == "/v1/keys/0123456789abcdef":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no key \"x\"","hint":"list them"}}`))
		}
	}))
	defer hs.Close()
	c, _ := client.New(hs.URL, "admin-key")
	ctx := context.Background()
	ks, err := c.ListKeys(ctx, "acme")
	if err != nil || len(ks) != 1 || ks[0].ID != rec.ID || !ks[0].Created.Equal(created) || ks[0].Agent != "ci-bot" {
		t.Errorf("ListKeys: %+v %v", ks, err)
	}
	k, err := c.CreateKey(ctx, api.CreateKeyRequest{Tenant: "acme", Agent: "ci-bot", Scopes: []string{"run"}, TTL: 60})
	if err != nil || k.Key != "abt_0123456789abcdef.secret" || k.Record.Tenant != "acme" {
		t.Errorf("CreateKey: %+v %v", k, err)
	}
	if body.Tenant != "acme" || body.Agent != "ci-bot" || body.TTL != 60 || len(body.Scopes) != 1 {
		t.Errorf("CreateKey sent %+v", body)
	}
	if k, err := c.RotateKey(ctx, "0123456789abcdef"); err != nil || k.Record.ID != "fedcba9876543210" {
		t.Errorf("RotateKey: %+v %v", k, err)
	}
	if err := c.RevokeKey(ctx, "0123456789abcdef"); err != nil {
		t.Errorf("RevokeKey: %v", err)
	}
	var ce *client.Error
	if err := c.RevokeKey(ctx, "a/b"); !errors.As(err, &ce) || ce.Code != api.CodeNotFound {
		t.Errorf("RevokeKey of an unknown key: %v", err)
	}
	want := []string{
		"GET /v1/keys?tenant=acme Bearer admin-key",
		"POST /v1/keys Bearer admin-key",
		"POST /v1/keys/0123456789abcdef/rotate Bearer admin-key",
		"DELETE /v1/keys/0123456789abcdef Bearer admin-key",
		"DELETE /v1/keys/a%2Fb Bearer admin-key",
	}
	if len(got) != len(want) {
		t.Fatalf("requests %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %q, want %q", i, got[i], want[i])
		}
	}
}
