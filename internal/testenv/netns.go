package testenv

import (
	"bytes"
	"net"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/netns"
)

// PublicHost is a network namespace of the test's own holding one address from TEST-NET-3
// (203.0.113.0/24): to the code under test it looks like a host on the internet, so egress
// tests need no real network and the SSRF guard (which refuses loopback and private ranges)
// is not bypassed to reach it.
type PublicHost struct {
	*netns.PublicHost
}

// NewPublicHost makes the namespace, linked to the host's by a veth pair, and removes it when
// the test ends. It needs root and ip(8).
func NewPublicHost(t testing.TB) *PublicHost {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "ip")
	h, err := netns.NewPublicHost()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return &PublicHost{h}
}

// Start starts name inside the namespace (a server of the test's on the host's address) and
// stops it when the test ends.
func (h *PublicHost) Start(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := h.Command(name, args...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s in the namespace: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s in the namespace said:\n%s", name, out.String())
		}
	})
}

// Listen opens a TCP listener on the host's address, closed when the test ends.
func (h *PublicHost) Listen(t testing.TB, port int) net.Listener {
	t.Helper()
	ln, err := h.PublicHost.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// lockedBuffer is a bytes.Buffer a process's stdout and stderr may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
