package netns_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestListenLeavesNoThreadInside: Listen enters the namespace on a thread of its own and leaves
// no thread of the process there. A goroutine that ends locked to the process's main thread does
// not end the thread (Go keeps it, parked): had Listen left it inside, /proc/self/net (the main
// thread's view, read by /proc/net/tcp) would show the namespace's sockets, not the process's,
// for the rest of the process — which once made the E2B debug listener, which looked its
// clients up there, answer 401.
func TestListenLeavesNoThreadInside(t *testing.T) {
	h := testenv.NewPublicHost(t)
	mine, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		ln, err := h.PublicHost.Listen(0)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if main, err := os.Readlink("/proc/self/ns/net"); err != nil || main != mine {
			t.Fatalf("after %d listeners the main thread is in %s, not the process's %s (%v)", i+1, main, mine, err)
		}
		runtime.Gosched()
	}
}
