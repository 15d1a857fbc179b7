package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/httpapi"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// keysEnv is an API with a key file, as the daemon serves it: testKey is its own (admin) key.
type keysEnv struct {
	*env
	path  string
	admin *client.Client
}

func newKeysEnv(t *testing.T) *keysEnv {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{newFake()}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	path := filepath.Join(t.TempDir(), auth.KeysFile)
	keys, err := auth.NewKeys(testKey, path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Options{Engine: sandbox.WithAudit(m, nil), Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	admin, err := client.New(hs.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return &keysEnv{env: &env{url: hs.URL, srv: srv, m: m, c: admin}, path: path, admin: admin}
}

func (e *keysEnv) clientOf(t *testing.T, key string) *client.Client {
	t.Helper()
	c, err := client.New(e.url, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func codeOf(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// The admin API of keys: an admin makes a key, which works on the next request; the list shows
// its record and never the key or its hash; rotate replaces it (the old one is refused at once);
// revoke ends it at once.
func TestKeysAdminAPI(t *testing.T) {
	t.Parallel()
	e := newKeysEnv(t)
	ctx := context.Background()
	if ks, err := e.admin.ListKeys(ctx, ""); err != nil || len(ks) != 0 {
		t.Fatalf("a new daemon's keys: %v %v", ks, err)
	}
	before := time.Now().Add(-time.Second)
	made, err := e.admin.CreateKey(ctx, api.CreateKeyRequest{Tenant: "acme", Agent: "ci-bot", Scopes: []string{"run", "sessions"}, TTL: 3600})
	if err != nil {
		t.Fatal(err)
	}
	rec := made.Record
	if id, _, ok := auth.ParseTenantKey(made.Key); !ok || id != rec.ID || rec.Tenant != "acme" || rec.Agent != "ci-bot" ||
		strings.Join(rec.Scopes, ",") != "run,sessions" || rec.Created.Before(before) || rec.Revoked != nil ||
		rec.Expires == nil || rec.Expires.Sub(rec.Created) != time.Hour {
		t.Fatalf("created %+v", made)
	}

	// The key works at once, as its tenant, within its scopes.
	acme := e.clientOf(t, made.Key)
	if _, err := acme.Run(ctx, api.RunRequest{Code: "print(1)"}); err != nil {
		t.Fatalf("the new key runs: %v", err)
	}
	if _, err := acme.ListKeys(ctx, ""); codeOf(err) != api.CodeForbidden || !strings.Contains(err.Error(), "admin") {
		t.Errorf("a key without admin lists keys: %v, want forbidden naming admin", err)
	}

	// The list: the record, never the key nor its hash.
	status, _, body := e.do(t, http.MethodGet, "/v1/keys", testKey, nil)
	_, secret, _ := auth.ParseTenantKey(made.Key)
	if status != http.StatusOK || strings.Contains(string(body), secret) || strings.Contains(string(body), "hash") {
		t.Errorf("GET /v1/keys: %d %s", status, body)
	}
	var list api.KeyList
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil || len(list.Keys) != 1 || list.Keys[0].ID != rec.ID || list.Keys[0].Agent != "ci-bot" {
		t.Errorf("GET /v1/keys: %s %v", body, err)
	}

	// Rotate: a new key for the same tenant, agent, scopes and lifetime; the old one is refused.
	rot, err := e.admin.RotateKey(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Record.ID == rec.ID || rot.Record.Tenant != "acme" || rot.Record.Agent != "ci-bot" ||
		strings.Join(rot.Record.Scopes, ",") != "run,sessions" || rot.Record.Expires == nil ||
		rot.Record.Expires.Sub(rot.Record.Created) != time.Hour || rot.Key == made.Key {
		t.Errorf("rotated %+v", rot)
	}
	if _, err := acme.Run(ctx, api.RunRequest{Code: "print(1)"}); codeOf(err) != api.CodeUnauthorized {
		t.Errorf("the rotated-out key: %v, want unauthorized", err)
	}
	acme2 := e.clientOf(t, rot.Key)
	if _, err := acme2.Run(ctx, api.RunRequest{Code: "print(1)"}); err != nil {
		t.Errorf("the rotated key: %v", err)
	}

	// Revoke: refused at once; the list shows when.
	if err := e.admin.RevokeKey(ctx, rot.Record.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acme2.Run(ctx, api.RunRequest{Code: "print(1)"}); codeOf(err) != api.CodeUnauthorized || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("the revoked key: %v, want unauthorized saying revoked", err)
	}
	ks, err := e.admin.ListKeys(ctx, "acme")
	if err != nil || len(ks) != 2 || ks[0].Revoked == nil || ks[1].Revoked == nil {
		t.Errorf("after rotate and revoke: %+v %v", ks, err)
	}
	// Revoking again keeps the first time.
	if err := e.admin.RevokeKey(ctx, rot.Record.ID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if again, _ := e.admin.ListKeys(ctx, ""); len(again) != 2 || !again[1].Revoked.Equal(*ks[1].Revoked) {
		t.Errorf("a second revocation changed the record: %+v", again)
	}
	if ks, err := e.admin.ListKeys(ctx, "beta"); err != nil || len(ks) != 0 {
		t.Errorf("keys of another tenant: %+v %v", ks, err)
	}
}

// Every keys route needs the admin scope: a tenant key with every other scope is forbidden, and
// changes nothing; a tenant key with admin manages keys.
func TestKeysRoutesNeedAdmin(t *testing.T) {
	t.Parallel()
	e := newKeysEnv(t)
	ctx := context.Background()
	var others []string
	for _, s := range auth.Scopes {
		if s != auth.ScopeAdmin {
			others = append(others, string(s))
		}
	}
	k, err := e.admin.CreateKey(ctx, api.CreateKeyRequest{Tenant: "acme", Scopes: others})
	if err != nil {
		t.Fatal(err)
	}
	victim, err := e.admin.CreateKey(ctx, api.CreateKeyRequest{Tenant: "beta", Scopes: []string{"run"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.CreateKeyRequest{Tenant: "acme", Scopes: []string{"admin"}})
	for _, r := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodGet, "/v1/keys", nil},
		{http.MethodPost, "/v1/keys", body},
		{http.MethodPost, "/v1/keys/" + victim.Record.ID + "/rotate", nil},
		{http.MethodDelete, "/v1/keys/" + victim.Record.ID, nil},
	} {
		status, _, b := e.do(t, r.method, r.path, k.Key, r.body)
		if eb := errorBody(t, b); status != http.StatusForbidden || eb.Error.Code != api.CodeForbidden || !strings.Contains(eb.Error.Message, "admin") {
			t.Errorf("%s %s with a tenant key without admin: %d %s", r.method, r.path, status, b)
		}
		if status, _, _ := e.do(t, r.method, r.path, "", r.body); status != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d", r.method, r.path, status)
		}
	}
	if ks, _ := e.admin.ListKeys(ctx, ""); len(ks) != 2 || ks[1].Revoked != nil {
		t.Errorf("refused requests changed the keys: %+v", ks)
	}
	if _, err := e.clientOf(t, victim.Key).Run(ctx, api.RunRequest{Code: "print(1)"}); err != nil {
		t.Errorf("the key others tried to revoke: %v", err)
	}

	// A tenant key with the admin scope is an admin of the daemon: it manages keys.
	boss, err := e.admin.CreateKey(ctx, api.CreateKeyRequest{Tenant: "ops", Scopes: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.clientOf(t, boss.Key).RevokeKey(ctx, victim.Record.ID); err != nil {
		t.Errorf("a tenant admin key revokes: %v", err)
	}
}

// Bad requests are typed: invalid_request with auth.NewKey's message for a bad tenant, agent or
// scope, not_found for an unknown id.
func TestKeysAPIErrors(t *testing.T) {
	t.Parallel()
	e := newKeysEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		req  api.CreateKeyRequest
		want string
	}{
		{api.CreateKeyRequest{Tenant: "Acme Corp", Scopes: []string{"run"}}, `tenant "Acme Corp": use 1 to 63 lowercase letters`},
		{api.CreateKeyRequest{Tenant: "", Scopes: []string{"run"}}, `tenant "": use`},
		{api.CreateKeyRequest{Tenant: "acme", Agent: "Bot!", Scopes: []string{"run"}}, `agent "Bot!"`},
		{api.CreateKeyRequest{Tenant: "acme", Scopes: []string{"root"}}, `unknown scope "root" (use run, sessions`},
		{api.CreateKeyRequest{Tenant: "acme"}, "at least one scope"},
		{api.CreateKeyRequest{Tenant: "acme", Scopes: []string{"run"}, TTL: -1}, "ttl -1"},
		{api.CreateKeyRequest{Tenant: "acme", Scopes: []string{"run"}, TTL: 1e12}, "ttl 1e+12"},
	} {
		_, err := e.admin.CreateKey(ctx, c.req)
		if codeOf(err) != api.CodeInvalidRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %+v: %v, want invalid_request with %q", c.req, err, c.want)
		}
	}
	status, _, b := e.do(t, http.MethodPost, "/v1/keys", testKey, []byte(`{"tenant":"acme","scopes":["run"],"key":"abt_mine"}`))
	if eb := errorBody(t, b); status != http.StatusBadRequest || !strings.Contains(eb.Error.Message, `unknown field "key"`) {
		t.Errorf("a body with a field of its own: %d %s", status, b)
	}
	status, _, b = e.do(t, http.MethodGet, "/v1/keys?tenant=a&tenant=b", testKey, nil)
	if status != http.StatusBadRequest {
		t.Errorf("a repeated filter: %d %s", status, b)
	}
	status, _, b = e.do(t, http.MethodGet, "/v1/keys?tennant=a", testKey, nil)
	if eb := errorBody(t, b); status != http.StatusBadRequest || !strings.Contains(eb.Error.Message, "tennant") {
		t.Errorf("a misspelt filter: %d %s", status, b)
	}
	for _, id := range []string{"0123456789abcdef", "nope"} {
		if _, err := e.admin.RotateKey(ctx, id); codeOf(err) != api.CodeNotFound || !strings.Contains(err.Error(), id) {
			t.Errorf("rotate %s: %v, want not_found", id, err)
		}
		if err := e.admin.RevokeKey(ctx, id); codeOf(err) != api.CodeNotFound {
			t.Errorf("revoke %s: %v, want not_found", id, err)
		}
	}
	if status, h, _ := e.do(t, http.MethodGet, "/v1/keys/0123456789abcdef", testKey, nil); status != http.StatusMethodNotAllowed || h.Get("Allow") != "DELETE" {
		t.Errorf("GET /v1/keys/{id}: %d Allow %q", status, h.Get("Allow"))
	}
	if ks, _ := e.admin.ListKeys(ctx, ""); len(ks) != 0 {
		t.Errorf("refused requests made keys: %+v", ks)
	}
}

// The API and `agentbox keys` change the key file at the same time without losing each other's
// keys: both go through auth.UpdateKeyFile's lock.
func TestKeysAPIAndCLIConcurrently(t *testing.T) {
	t.Parallel()
	e := newKeysEnv(t)
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := e.admin.CreateKey(ctx, api.CreateKeyRequest{Tenant: "api", Scopes: []string{"run"}}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			err := cli.KeysCreate(cli.KeysOptions{DataDir: filepath.Dir(e.path), Tenant: "cli", Agent: "n" + string(rune('a'+i)),
				Scopes: []auth.Scope{auth.ScopeRun}, Out: &out, Now: time.Now})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ks, err := e.admin.ListKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, k := range ks {
		count[k.Tenant]++
	}
	if count["api"] != n || count["cli"] != n {
		t.Errorf("keys after %d creations each: %v", n, count)
	}
}

// A daemon without a key file has no tenant keys: the list is empty, changes are a conflict.
func TestKeysWithoutKeyFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if ks, err := e.c.ListKeys(ctx, ""); err != nil || len(ks) != 0 {
		t.Errorf("list: %v %v", ks, err)
	}
	if _, err := e.c.CreateKey(ctx, api.CreateKeyRequest{Tenant: "acme", Scopes: []string{"run"}}); codeOf(err) != api.CodeConflict {
		t.Errorf("create: %v, want conflict", err)
	}
	if err := e.c.RevokeKey(ctx, "0123456789abcdef"); codeOf(err) != api.CodeConflict {
		t.Errorf("revoke: %v, want conflict", err)
	}
}
