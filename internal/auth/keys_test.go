package auth_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// newKeyFile makes a key file with one key of tenant acme and returns the authenticator, the key
// and the file.
func newKeyFile(t testing.TB, scopes []auth.Scope, ttl time.Duration) (*auth.Keys, string, string, auth.KeyRecord) {
	t.Helper()
	path := filepath.Join(t.TempDir(), auth.KeysFile)
	key, rec, err := auth.NewKey("acme", "ci-bot", scopes, ttl, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.UpdateKeyFile(path, func(r []auth.KeyRecord) ([]auth.KeyRecord, error) { return append(r, rec), nil }); err != nil {
		t.Fatal(err)
	}
	k, err := auth.NewKeys(key+"-bootstrap-is-different", path)
	if err != nil {
		t.Fatal(err)
	}
	return k, key, path, rec
}

func TestTenantKeys(t *testing.T) {
	t.Parallel()
	k, key, path, rec := newKeyFile(t, []auth.Scope{auth.ScopeRun, auth.ScopeSessions}, 0)
	id, err := k.Authenticate(key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if id.Tenant != "acme" || id.Agent != "ci-bot" || id.KeyID != rec.ID || id.Admin ||
		!id.Has(auth.ScopeSessions) || id.Has(auth.ScopeAuditRead) {
		t.Errorf("identity %+v", id)
	}
	// The file keeps the hash, never the key, and only its owner reads it.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := auth.ParseTenantKey(key)
	if strings.Contains(string(b), secret) || strings.Contains(string(b), key) {
		t.Error("the key file holds the key")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	for _, bad := range []string{key + "x", key[:len(key)-1], "abt_" + rec.ID + ".wrongsecretwrongsecretwrongsecretwrongsecret", "abt_", "nope"} {
		if _, err := k.Authenticate(bad, time.Now()); sandbox.KindOf(err) != sandbox.KindUnauthorized {
			t.Errorf("%q: %v, want unauthorized", bad, err)
		}
	}
	// Revoked: refused from the next request on, as the daemon reads the file again.
	err = auth.UpdateKeyFile(path, func(r []auth.KeyRecord) ([]auth.KeyRecord, error) {
		now := time.Now()
		r[0].Revoked = &now
		return r, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(key, time.Now()); sandbox.KindOf(err) != sandbox.KindUnauthorized || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked key: %v", err)
	}
}

func TestExpiredKey(t *testing.T) {
	t.Parallel()
	k, key, _, _ := newKeyFile(t, []auth.Scope{auth.ScopeRun}, time.Hour)
	if _, err := k.Authenticate(key, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(key, time.Now().Add(time.Hour)); sandbox.KindOf(err) != sandbox.KindUnauthorized || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired key: %v", err)
	}
}

func TestNewKeyChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tenant, agent string
		scopes        []auth.Scope
	}{
		{"", "", []auth.Scope{auth.ScopeRun}},
		{"Acme", "", []auth.Scope{auth.ScopeRun}},
		{"acme", "bad agent", []auth.Scope{auth.ScopeRun}},
		{"acme", "", nil},
		{"acme", "", []auth.Scope{"root"}},
	} {
		if _, _, err := auth.NewKey(tc.tenant, tc.agent, tc.scopes, 0, time.Now()); err == nil {
			t.Errorf("NewKey(%q, %q, %v) accepted", tc.tenant, tc.agent, tc.scopes)
		}
	}
}

// A key without a route's scope is refused with forbidden, naming the scope; the identity reaches
// the handler.
func TestRequireScope(t *testing.T) {
	t.Parallel()
	k, key, _, _ := newKeyFile(t, []auth.Scope{auth.ScopeRun}, 0)
	b := auth.NewBearerFor(k)
	var got auth.Identity
	var failed error
	h := b.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = auth.IdentityOf(r.Context())
		w.WriteHeader(http.StatusTeapot)
	}), func(w http.ResponseWriter, r *http.Request, err error) {
		failed = err
		w.WriteHeader(http.StatusForbidden)
	},
		auth.ScopeSessions)
	r := httptest.NewRequest("GET", "/v1/sessions", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if e := sandbox.AsError(failed); e == nil || e.Kind != sandbox.KindForbidden || !strings.Contains(e.Message, "sessions scope") {
		t.Errorf("without the scope: %v", failed)
	}
	failed = nil
	h = b.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = auth.IdentityOf(r.Context())
		w.WriteHeader(http.StatusTeapot)
	}), func(w http.ResponseWriter, r *http.Request, err error) { failed = err }, auth.ScopeRun)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTeapot || failed != nil || got.Tenant != "acme" {
		t.Errorf("with the scope: %d %v %+v", w.Code, failed, got)
	}
}

// FuzzParseTenantKey: the parser never panics, and what it accepts is exactly the key format.
func FuzzParseTenantKey(f *testing.F) {
	key, _, _ := auth.NewKey("acme", "", []auth.Scope{auth.ScopeRun}, 0, time.Now())
	for _, s := range []string{key, "abt_", "abt_0123456789abcdef.", "abk_x", "", "abt_0123456789abcdef." + strings.Repeat("a", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, ok := auth.ParseTenantKey(s)
		if ok && (s != "abt_"+id+"."+secret || len(id) != 16 || len(secret) < 32) {
			t.Errorf("%q parsed as %q, %q", s, id, secret)
		}
	})
}

// FuzzAuthenticate: whatever the token, the check answers an identity only for the real keys.
func FuzzAuthenticate(f *testing.F) {
	k, key, _, _ := newKeyFile(f, []auth.Scope{auth.ScopeRun}, 0)
	f.Add(key)
	f.Add(key[:len(key)-1] + "A")
	f.Add("abt_" + strings.Repeat("0", 16) + "." + strings.Repeat("A", 43))
	f.Fuzz(func(t *testing.T, s string) {
		id, err := k.Authenticate(s, time.Now())
		if err == nil && s != key {
			t.Errorf("%q authenticated as %+v", s, id)
		}
		if err != nil && sandbox.KindOf(err) != sandbox.KindUnauthorized {
			t.Errorf("%q: %v, want unauthorized", s, err)
		}
	})
}

// BenchmarkAuthorize is the authorization check's cost per request: a tenant key looked up (the
// key file's stat included), hashed, compared, and its scope checked.
func BenchmarkAuthorize(b *testing.B) {
	k, key, _, _ := newKeyFile(b, []auth.Scope{auth.ScopeRun, auth.ScopeSessions}, 0)
	bearer := auth.NewBearerFor(k)
	r := httptest.NewRequest("POST", "/v1/run", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	b.ReportAllocs()
	for b.Loop() {
		id, err := bearer.Identify(r)
		if err != nil || !id.Has(auth.ScopeRun) {
			b.Fatal(err)
		}
	}
}
