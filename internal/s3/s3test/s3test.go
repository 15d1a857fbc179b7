package s3test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/s3"
	"github.com/agentbox-dev/agentbox/internal/s3/s3local"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Server is the test binary's S3-compatible server.
type Server struct{ *s3local.Server }

// Bucket makes a bucket of a fresh name and returns a client of it under prefix.
func (s Server) Bucket(t testing.TB, prefix string) *s3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := s.NewBucket(ctx, prefix)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.Log())
	}
	return c
}

var (
	shared     *s3local.Server
	sharedErr  error
	sharedOnce sync.Once
)

// Shared returns the test binary's server, started by the first call (it starts in seconds, not
// milliseconds). Call Stop from TestMain; a server left running dies with the test binary
// (Pdeathsig).
func Shared(t testing.TB) Server {
	t.Helper()
	weed := testenv.RequireSeaweedFS(t)
	sharedOnce.Do(func() { shared, sharedErr = s3local.Start(weed) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return Server{shared}
}

// Stop ends the shared server, if one started.
func Stop() {
	if shared != nil {
		shared.Stop()
	}
}
