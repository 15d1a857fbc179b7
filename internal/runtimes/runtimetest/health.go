package runtimetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// health: a runtime that reports its health (sandbox.Health) says, fresh from its constructor,
// that it can take runs, in words.
func (s *suite) health(t *testing.T) {
	h, ok := s.rt.(sandbox.Health)
	if !ok {
		t.Skip("the runtime does not report its health (sandbox.Health)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	state, ok := h.Health(ctx)
	if !ok {
		t.Errorf("a fresh runtime reports %q and not ok", state)
	}
	if state == "" {
		t.Errorf("the health report has no state")
	}
}

// healthAfterClose closes the runtime (the suite's last case): a runtime that reports its health
// no longer says it can take runs.
func (s *suite) healthAfterClose(t *testing.T) {
	h, ok := s.rt.(sandbox.Health)
	if !ok {
		t.Skip("the runtime does not report its health (sandbox.Health)")
	}
	s.closed = true
	if err := s.rt.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if state, ok := h.Health(ctx); ok {
		t.Errorf("a closed runtime reports %q and ok", state)
	}
}
