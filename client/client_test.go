package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

func TestNewRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:8420", "ftp://x", "http://"} {
		if _, err := client.New(u, "k"); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func TestFromEnv(t *testing.T) {
	var gotAuth string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"sessions":[]}`))
	}))
	defer hs.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api_key"), []byte("file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTBOX_URL", hs.URL+"/")
	t.Setenv("AGENTBOX_API_KEY", "")
	t.Setenv("AGENTBOX_DATA_DIR", dir)
	c, err := client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSessions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if gotAuth != "Bearer file-key" {
		t.Errorf("key from the data directory: Authorization %q", gotAuth)
	}
	t.Setenv("AGENTBOX_API_KEY", "env-key")
	c, _ = client.FromEnv()
	c.ListSessions(context.Background())
	if gotAuth != "Bearer env-key" {
		t.Errorf("key from the environment: Authorization %q", gotAuth)
	}
	t.Setenv("AGENTBOX_URL", "")
	if c, _ := client.FromEnv(); c.URL() != client.DefaultURL {
		t.Errorf("default URL %q", c.URL())
	}
}

// Answers that are not the API's error body (a proxy's page) still become *Error.
func TestForeignErrorBodies(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer hs.Close()
	c, _ := client.New(hs.URL, "k")
	_, err := c.Run(context.Background(), api.RunRequest{Code: "x"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 502 || ce.Code != api.CodeRuntimeUnavailable || ce.Hint == "" {
		t.Errorf("got %#v", err)
	}
	if _, err := c.Health(context.Background()); !errors.As(err, &ce) {
		t.Errorf("health from a foreign server: %v", err)
	}
}

// A daemon that is not there is a transport error, not an *Error.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close()
	c, _ := client.New(url, "k")
	_, err := c.Health(context.Background())
	var ce *client.Error
	if err == nil || errors.As(err, &ce) {
		t.Errorf("got %v", err)
	}
}

// Inspecting and diffing a step in a code context asks for it in the query; without one the
// query is as before.
func TestInspectStepContextQuery(t *testing.T) {
	var got []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"step":"st_1","context":"a b","variables":[],"files":[]}`))
	}))
	defer hs.Close()
	c, err := client.New(hs.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, err := c.InspectStepIn(ctx, "sb_1", "st_1", "a b")
	if err != nil || in.Context != "a b" {
		t.Fatalf("%+v %v", in, err)
	}
	c.InspectStep(ctx, "sb_1", "st_1")
	c.DiffStepsIn(ctx, "sb_1", "st_2", "st_1", "a")
	c.DiffSteps(ctx, "sb_1", "st_2", "")
	want := []string{"/v1/sessions/sb_1/steps/st_1/inspect?context=a+b", "/v1/sessions/sb_1/steps/st_1/inspect",
		"/v1/sessions/sb_1/steps/st_2/diff?base=st_1&context=a", "/v1/sessions/sb_1/steps/st_2/diff"}
	if len(got) != len(want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %s, want %s", i, got[i], want[i])
		}
	}
}
