package heavy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Code may knock on the proxy port of a sandbox without a way out as often as it likes: the
// daemon's log says so at most once a second per sandbox, and again once a second has passed.
func TestRefusedEgressWarnsOncePerSecond(t *testing.T) {
	var logged bytes.Buffer
	b := &box{id: "test", log: slog.New(slog.NewTextHandler(&logged, nil))}
	for range 100 {
		b.warnRefused("heavy: a connection to the egress proxy while the sandbox has no way out, closed")
	}
	if n := strings.Count(logged.String(), "level=WARN"); n != 1 {
		t.Fatalf("100 refusals in a burst logged %d warnings, want 1:\n%s", n, logged.String())
	}
	b.egress.mu.Lock()
	b.egress.warned = time.Now().Add(-2 * time.Second)
	b.egress.mu.Unlock()
	b.warnRefused("heavy sandbox: agentbox-guest: egress: tunnel closed")
	if n := strings.Count(logged.String(), "level=WARN"); n != 2 {
		t.Fatalf("a refusal a second after the last logged %d warnings in all, want 2:\n%s", n, logged.String())
	}
}
