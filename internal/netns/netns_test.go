package netns_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/netns"
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

// TestHostsDoNotShareAddresses: a host never gets a /30 another link of this machine has an
// address in (a host of this process or another, or one a killed process left behind). Two
// hosts on one /30 make two routes to it, and connections to the newer host went to the older
// one's namespace, where nothing listened: its test's client was refused though its server was
// up (TestPackagesOnDemand in CI: the gateway's dial refused, pip's proxy hung up).
func TestHostsDoNotShareAddresses(t *testing.T) {
	a := testenv.NewPublicHost(t)
	k := slot(t, a.Addr)
	if used, err := netns.SlotUsed(k); err != nil || !used {
		t.Fatalf("the /30 of %s is not seen as used: %v %v", a.Addr, used, err)
	}
	// A host made on a's /30 regardless (as a process that does not take the lock would) is
	// refused, since the route to it leaves through a's link, and leaves nothing behind.
	if h, err := netns.NewPublicHostAt(k); !errors.Is(err, netns.ErrTaken) {
		if h != nil {
			h.Close()
		}
		t.Fatalf("a second host on the /30 of %s: %v, want it refused as taken", a.Addr, err)
	}
	if n := linksIn(t, k); n != 1 {
		t.Fatalf("%d links have an address in the /30 of %s after the refused host, want 1 (a's)", n, a.Addr)
	}
	// Hosts made while a lives take other /30s, and their servers answer.
	for i := 0; i < 6; i++ {
		b := testenv.NewPublicHost(t)
		if slot(t, b.Addr) == k {
			t.Fatalf("host %s took the /30 of %s", b.Addr, a.Addr)
		}
		ln := b.Listen(t, 0)
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatalf("a server of host %s: %v", b.Addr, err)
		}
		c.Close()
		b.Close()
	}
}

func slot(t *testing.T, addr string) int {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	return int(ip.As4()[3]) / 4
}

// linksIn counts this namespace's interfaces with an address in the /30 of slot k.
func linksIn(t *testing.T, k int) int {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(4 * k)}), 30)
	n := 0
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && p.Contains(ip.Unmap()) {
					n++
					break
				}
			}
		}
	}
	return n
}

// TestLeftHostsAreRemoved: a host whose process ended without Close (killed, or a test binary
// that timed out) is removed, link and namespace, by the next NewPublicHost, and its /30 is free
// again; there are only 64.
func TestLeftHostsAreRemoved(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "ip")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	k := -1
	for i := 63; i >= 0; i-- {
		if used, err := netns.SlotUsed(i); err == nil && !used {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatal("no free /30")
	}
	id := fmt.Sprintf("%04x", rand.IntN(1<<16))
	ns, link := fmt.Sprintf("abx-%s-%d", id, dead.Process.Pid), "abh"+id
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", link).Run()
		exec.Command("ip", "netns", "del", ns).Run()
	})
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", link, "type", "veth", "peer", "name", "abn" + id},
		{"addr", "add", fmt.Sprintf("203.0.113.%d/30", 4*k+1), "dev", link},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	if used, _ := netns.SlotUsed(k); !used {
		t.Fatalf("the left host's /30 (%d) is not seen as used", k)
	}
	testenv.NewPublicHost(t)
	if _, err := os.Stat("/var/run/netns/" + ns); err == nil {
		t.Errorf("the namespace %s of an ended process is still there", ns)
	}
	if _, err := net.InterfaceByName(link); err == nil {
		t.Errorf("the link %s of an ended process is still there", link)
	}
	if used, _ := netns.SlotUsed(k); used {
		t.Errorf("the left host's /30 (%d) is still used", k)
	}
}
