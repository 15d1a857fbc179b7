package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
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
