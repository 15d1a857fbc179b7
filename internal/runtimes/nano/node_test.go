package nano

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A cluster node's workers run in its own uid range (Options.UIDBase), and the runtime reports
// its parked interpreters as free warm slots (sandbox.WarmReporter) for the gateway's placement.
func TestUIDBaseAndWarmFree(t *testing.T) {
	r, err := New(context.Background(), Options{Artifacts: artifacts(t), Workers: 1, Warm: 2, UIDBase: 200000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.mu.Lock()
	p := r.free[0]
	r.mu.Unlock()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "Uid:\t200000\t") {
		t.Errorf("worker of slot 0 is not uid 200000:\n%s", status)
	}
	// The worker parks its interpreters after it starts.
	deadline := time.Now().Add(30 * time.Second)
	for r.WarmFree()[sandbox.DefaultImage] != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.WarmFree()[sandbox.DefaultImage]; got != 2 {
		t.Errorf("WarmFree = %d, want the 2 parked interpreters", got)
	}
}
