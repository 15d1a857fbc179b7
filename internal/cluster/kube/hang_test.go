package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// An API server that takes the connection and never answers fails the start within its bound,
// even when the caller's context has no deadline: a gateway reports it instead of hanging.
func TestNewAPIServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := newWithin(context.Background(), client, Spec{Namespace: "agentbox", Service: "agentbox-nodes"}, nil, 300*time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("New succeeded against an API server that never answers")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("New still waits for an API server that never answers")
	}
}
