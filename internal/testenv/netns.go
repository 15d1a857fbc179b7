package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// PublicHost is a network namespace of the test's own holding one address from TEST-NET-3
// (203.0.113.0/24): to the code under test it looks like a host on the internet, so egress
// tests need no real network and the SSRF guard (which refuses loopback and private ranges)
// is not bypassed to reach it.
type PublicHost struct {
	// Addr is the host's address, e.g. 203.0.113.18.
	Addr string
	name string
}

// NewPublicHost makes the namespace, linked to the host's by a veth pair, and removes it when
// the test ends. It needs root and ip(8).
func NewPublicHost(t testing.TB) *PublicHost {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "ip")
	// A /30 of TEST-NET-3 per host: .4k+1 on the host's side, .4k+2 in the namespace.
	k := rand.IntN(60) + 1
	id := fmt.Sprintf("%04x", rand.IntN(1<<16))
	ns, hostIf, nsIf := "abx-"+id, "abh"+id, "abn"+id
	hostAddr, nsAddr := fmt.Sprintf("203.0.113.%d", 4*k+1), fmt.Sprintf("203.0.113.%d", 4*k+2)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	run("link", "set", nsIf, "netns", ns)
	run("addr", "add", hostAddr+"/30", "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("-n", ns, "addr", "add", nsAddr+"/30", "dev", nsIf)
	run("-n", ns, "link", "set", nsIf, "up")
	run("-n", ns, "link", "set", "lo", "up")
	return &PublicHost{Addr: nsAddr, name: ns}
}

// Listen opens a TCP listener on the host's address. A socket belongs to the namespace it was
// made in, so the listener serves from any goroutine afterwards.
func (h *PublicHost) Listen(t testing.TB, port int) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// This thread enters the namespace and is never returned to the scheduler: it ends with
		// the goroutine, so no other goroutine runs in the wrong namespace.
		runtime.LockOSThread()
		f, e := os.Open("/var/run/netns/" + h.name)
		if e != nil {
			err = e
			return
		}
		defer f.Close()
		if e := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); e != nil {
			err = fmt.Errorf("setns: %w", e)
			return
		}
		ln, err = net.Listen("tcp", fmt.Sprintf("%s:%d", h.Addr, port))
	}()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
