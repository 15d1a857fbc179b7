package httpapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/httpapi"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// An artifact belongs to the tenant whose run made it: another tenant gets not_found for its id,
// the daemon's own key (an admin) gets it.
func TestArtifactsBelongToTheirTenant(t *testing.T) {
	t.Parallel()
	rt := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	rt.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		return &sandbox.Result{Stdout: "drew\n", Artifacts: []sandbox.Artifact{{Name: "figure-1.png", MIME: "image/png", Content: []byte("\x89PNG acme's figure")}}}, nil
	}
	store, err := artifacts.Open(t.TempDir(), artifacts.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, Artifacts: store, Logger: slog.New(slog.DiscardHandler)})
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
	clientOf := func(tenant string) *client.Client {
		k, rec, err := auth.NewKey(tenant, "", []auth.Scope{auth.ScopeRun}, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := auth.UpdateKeyFile(path, func(r []auth.KeyRecord) ([]auth.KeyRecord, error) { return append(r, rec), nil }); err != nil {
			t.Fatal(err)
		}
		c, err := client.New(hs.URL, k)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := clientOf("acme"), clientOf("beta")
	admin, err := client.New(hs.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := a.Run(ctx, api.RunRequest{Code: "draw()"})
	if err != nil || len(res.Artifacts) != 1 {
		t.Fatalf("acme's run: %+v %v", res, err)
	}
	id := res.Artifacts[0].ID
	if body, _, err := a.Artifact(ctx, id); err != nil || string(body) != "\x89PNG acme's figure" {
		t.Errorf("acme downloads its artifact: %q %v", body, err)
	}
	var ce *client.Error
	if _, _, err := b.Artifact(ctx, id); !errors.As(err, &ce) || ce.Code != api.CodeNotFound {
		t.Errorf("beta downloads acme's artifact: %v, want not_found", err)
	}
	if _, _, err := admin.Artifact(ctx, id); err != nil {
		t.Errorf("the admin key downloads it: %v", err)
	}
}

// Each route takes the scopes its table names: a tenant key with every scope but admin reads no
// metrics (they count every tenant's work) and reloads no egress policy without policy-admin; a
// key with only run creates no session. Each refusal is forbidden and names the scope.
func TestRouteScopes(t *testing.T) {
	t.Parallel()
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
	srv, err := httpapi.New(httpapi.Options{Engine: m, Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	keyOf := func(scopes ...auth.Scope) string {
		k, _, err := auth.CreateKey(path, "acme", "", scopes, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	allButAdmin := keyOf(auth.ScopeRun, auth.ScopeSessions, auth.ScopeFiles, auth.ScopeEgressIntent, auth.ScopeAuditRead)
	runOnly := keyOf(auth.ScopeRun)
	for _, tc := range []struct {
		method, path, key, scope string
	}{
		{"GET", "/metrics", allButAdmin, "admin"},
		{"POST", "/v1/egress/reload", allButAdmin, "policy-admin"},
		{"POST", "/v1/sessions", runOnly, "sessions"},
		{"GET", "/v1/audit", runOnly, "audit-read"},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tc.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"forbidden"`) || !strings.Contains(string(b), tc.scope+" scope") {
			t.Errorf("%s %s: %d %s, want forbidden naming %s", tc.method, tc.path, resp.StatusCode, b, tc.scope)
		}
	}
}
