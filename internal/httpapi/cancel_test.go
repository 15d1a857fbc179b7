package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// TestRunStopsWithItsRequest: a run gets its request's context, so a client that goes away, or a
// daemon that cancels requests at its shutdown bound (internal/daemon/http_test.go), stops it.
// The fake's sleep ends only when its context does; the request is then counted as 499.
func TestRunStopsWithItsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.c.Run(ctx, api.RunRequest{Code: "sleep:1m"}); err == nil {
		t.Fatal("a run whose client went away finished normally")
	}
	const gone = `agentbox_http_requests_total{method="POST",route="/v1/run",runtime="none",status="499"} 1`
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, b := e.do(t, "GET", "/metrics", testKey, nil)
		if strings.Contains(string(b), gone) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not stop with its request: metrics lack %s", gone)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
