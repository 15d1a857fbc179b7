package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestRunStopsWithItsRequest: a run gets its request's context, so a client that goes away, or a
// daemon that cancels requests at its shutdown bound (internal/daemon/http_test.go), stops it.
// The fake's sleep ends only when its context does; the request is then counted as 499.
func TestRunStopsWithItsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The client goes away once the run has reached the runtime (a 100 ms timeout here could end
	// the request on a loaded machine before the daemon had it, and nothing was counted).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner := e.rt.Answer
	e.rt.Answer = func(ctx context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		cancel()
		return inner(ctx, req, s)
	}
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
