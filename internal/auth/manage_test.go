package auth_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// CreateKey, RotateKey and RevokeKey change the key file as `agentbox keys` and the admin API
// need, with typed errors.
func TestManageKeys(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), auth.KeysFile)
	k, err := auth.NewKeys("bootstrap-key", path)
	if err != nil {
		t.Fatal(err)
	}
	if k.Path() != path {
		t.Errorf("Path %q", k.Path())
	}
	now := time.Now()
	key, rec, err := auth.CreateKey(path, "acme", "bot", []auth.Scope{auth.ScopeRun}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := k.Authenticate(key, now); err != nil || who.KeyID != rec.ID || who.Agent != "bot" {
		t.Fatalf("the created key: %+v %v", who, err)
	}
	for _, c := range []struct {
		tenant string
		scopes []auth.Scope
		ttl    time.Duration
		want   string
	}{
		{"Acme", []auth.Scope{auth.ScopeRun}, 0, `tenant "Acme"`},
		{"acme", []auth.Scope{"root"}, 0, `unknown scope "root"`},
		{"acme", nil, 0, "at least one scope"},
		{"acme", []auth.Scope{auth.ScopeRun}, -time.Second, "negative"},
	} {
		if _, _, err := auth.CreateKey(path, c.tenant, "", c.scopes, c.ttl, now); sandbox.KindOf(err) != sandbox.KindInvalidRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CreateKey(%q, %v, %v): %v, want invalid_request with %q", c.tenant, c.scopes, c.ttl, err, c.want)
		}
	}
	later := now.Add(time.Minute)
	key2, rec2, err := auth.RotateKey(path, rec.ID, later)
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Tenant != "acme" || rec2.Agent != "bot" || rec2.Expires == nil || rec2.Expires.Sub(rec2.Created) != time.Hour {
		t.Errorf("rotated record %+v", rec2)
	}
	if _, err := k.Authenticate(key, later); sandbox.KindOf(err) != sandbox.KindUnauthorized {
		t.Errorf("the rotated-out key: %v", err)
	}
	got, err := auth.RevokeKey(path, rec2.ID, later)
	if err != nil || got.Revoked == nil || !got.Revoked.Equal(later.UTC()) {
		t.Fatalf("RevokeKey: %+v %v", got, err)
	}
	if _, err := k.Authenticate(key2, later); sandbox.KindOf(err) != sandbox.KindUnauthorized {
		t.Errorf("the revoked key: %v", err)
	}
	if again, err := auth.RevokeKey(path, rec2.ID, later.Add(time.Hour)); err != nil || !again.Revoked.Equal(*got.Revoked) {
		t.Errorf("a second revocation: %+v %v", again, err)
	}
	for _, id := range []string{"0123456789abcdef", ""} {
		if _, err := auth.RevokeKey(path, id, now); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("RevokeKey(%q): %v, want not_found", id, err)
		}
		if _, _, err := auth.RotateKey(path, id, now); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("RotateKey(%q): %v, want not_found", id, err)
		}
	}
	recs, err := auth.ReadKeyFile(path)
	if err != nil || len(recs) != 2 {
		t.Errorf("the file has %d records (%v), want 2", len(recs), err)
	}
}
