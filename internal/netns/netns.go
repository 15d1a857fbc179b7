package netns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PublicHost is a network namespace holding one address from TEST-NET-3 (203.0.113.0/24).
type PublicHost struct {
	// Addr is the host's address, e.g. 203.0.113.18.
	Addr string
	name string
	undo []func()
}

// NewPublicHost makes the namespace, linked to the host's by a veth pair. It needs root and
// ip(8); Close removes it.
//
// Each host gets a /30 of TEST-NET-3 (.4k+1 on the host's side, .4k+2 in the namespace) that no
// interface of this host's namespace has an address in, chosen under a lock that every process
// of this package takes (lockFile): tests of several packages or several checkouts may run at
// once on one machine, and a namespace whose process was killed before Close is left behind. Two
// hosts on one /30 make two routes to it, and connections go to the older namespace, where
// nothing listens: the test's client is refused (connection refused) though its server is up.
// So the route to the new address is checked to leave through the new link. Namespaces of
// processes that ended without Close are removed first (reap).
func NewPublicHost() (*PublicHost, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("netns: ip(8) is not installed (apt-get install iproute2)")
	}
	unlock, err := lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	reap()
	var last error
	for _, k := range rand.Perm(slots) {
		if used, err := slotUsed(k); err != nil {
			return nil, err
		} else if used {
			continue
		}
		h, err := newPublicHost(k)
		if err == nil {
			return h, nil
		}
		last = err
		if !errors.Is(err, errTaken) {
			return nil, err
		}
	}
	if last == nil {
		last = fmt.Errorf("all %d are in use (ip -br addr; namespaces left behind: ip netns list, abx-*)", slots)
	}
	return nil, fmt.Errorf("netns: no free /30 in 203.0.113.0/24: %w", last)
}

// slots is the number of /30s in TEST-NET-3.
const slots = 64

// lockFile serializes the choice of a /30 between processes.
var lockFile = filepath.Join(os.TempDir(), "agentbox-netns.lock")

func lock() (func(), error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("netns: lock %s: %w", lockFile, err)
	}
	return func() { f.Close() }, nil
}

// slotUsed reports whether an interface of this namespace has an address in the /30 of slot k.
func slotUsed(k int) (bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, fmt.Errorf("netns: %w", err)
	}
	prefix := netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(4 * k)}), 30)
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(ipn.IP); ok && prefix.Contains(ip.Unmap()) {
			return true, nil
		}
	}
	return false, nil
}

// leftRe matches the namespaces this package makes: abx-ID-PID, PID the process that made it.
var leftRe = regexp.MustCompile(`^abx-([0-9a-f]{4})-([0-9]+)$`)

// reap removes the namespaces, and their links, of processes that ended without Close (killed,
// or a test binary that timed out): their /30s would stay taken for good, and there are 64. A
// namespace whose process still runs is left alone, as are ones without a PID in their name
// (nothing tells whose they are). The lock is held.
func reap() {
	ents, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		m := leftRe.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[2])
		if err != nil || pid <= 0 || pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		_ = exec.Command("ip", "link", "del", "abh"+m[1]).Run()
		_ = exec.Command("ip", "netns", "del", e.Name()).Run()
	}
}

// errTaken is a slot or a name someone else holds: another one is tried.
var errTaken = errors.New("taken")

func newPublicHost(k int) (*PublicHost, error) {
	id := fmt.Sprintf("%04x", rand.IntN(1<<16))
	ns, hostIf, nsIf := fmt.Sprintf("abx-%s-%d", id, os.Getpid()), "abh"+id, "abn"+id
	if _, err := os.Stat("/var/run/netns/" + ns); err == nil {
		return nil, fmt.Errorf("namespace %s exists: %w", ns, errTaken)
	}
	if _, err := net.InterfaceByName(hostIf); err == nil {
		return nil, fmt.Errorf("link %s exists: %w", hostIf, errTaken)
	}
	hostAddr, nsAddr := fmt.Sprintf("203.0.113.%d", 4*k+1), fmt.Sprintf("203.0.113.%d", 4*k+2)
	h := &PublicHost{Addr: nsAddr, name: ns}
	steps := []struct {
		args []string
		undo []string
	}{
		{[]string{"netns", "add", ns}, []string{"netns", "del", ns}},
		{[]string{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf}, []string{"link", "del", hostIf}},
		{[]string{"link", "set", nsIf, "netns", ns}, nil},
		{[]string{"addr", "add", hostAddr + "/30", "dev", hostIf}, nil},
		{[]string{"link", "set", hostIf, "up"}, nil},
		{[]string{"-n", ns, "addr", "add", nsAddr + "/30", "dev", nsIf}, nil},
		{[]string{"-n", ns, "link", "set", nsIf, "up"}, nil},
		{[]string{"-n", ns, "link", "set", "lo", "up"}, nil},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s.args...).CombinedOutput(); err != nil {
			h.Close()
			return nil, fmt.Errorf("netns: ip %s: %v: %s", strings.Join(s.args, " "), err, out)
		}
		if s.undo != nil {
			u := s.undo
			h.undo = append(h.undo, func() { _ = exec.Command("ip", u...).Run() })
		}
	}
	// The host's address must be reached through this link, not through a route someone else
	// made to the same /30 (a namespace of a process that did not take the lock).
	out, err := exec.Command("ip", "-o", "route", "get", nsAddr).CombinedOutput()
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netns: ip route get %s: %v: %s", nsAddr, err, out)
	}
	if !strings.Contains(" "+string(out)+" ", " dev "+hostIf+" ") {
		h.Close()
		return nil, fmt.Errorf("the route to %s does not leave through %s (%s): %w", nsAddr, hostIf, strings.TrimSpace(string(out)), errTaken)
	}
	return h, nil
}

// Close removes the namespace and its link, newest first.
func (h *PublicHost) Close() {
	for i := len(h.undo) - 1; i >= 0; i-- {
		h.undo[i]()
	}
	h.undo = nil
}

// Command is a command that runs inside the namespace (ip netns exec): a server of the test's
// (a DNS resolver, say) on the host's address.
func (h *PublicHost) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.name, name}, args...)...)
}

// Listen opens a TCP listener on the host's address. A socket belongs to the namespace it was
// made in, so the listener serves from any goroutine afterwards.
func (h *PublicHost) Listen(port int) (net.Listener, error) {
	var ln net.Listener
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// This thread enters the namespace, makes the socket and goes back before it is returned
		// to the scheduler, so no other goroutine runs in the wrong namespace. Ending the
		// goroutine locked instead would not do: when it runs on the process's main thread, Go
		// parks that thread rather than ending it, and the main thread is what /proc/self/net
		// (so /proc/net/tcp) shows, for the rest of the process. Only when going back fails does
		// the thread stay locked, to end with the goroutine.
		runtime.LockOSThread()
		back, e := os.Open("/proc/thread-self/ns/net")
		if e != nil {
			runtime.UnlockOSThread()
			err = e
			return
		}
		defer back.Close()
		f, e := os.Open("/var/run/netns/" + h.name)
		if e != nil {
			runtime.UnlockOSThread()
			err = e
			return
		}
		defer f.Close()
		if e := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); e != nil {
			runtime.UnlockOSThread()
			err = fmt.Errorf("setns: %w", e)
			return
		}
		ln, err = net.Listen("tcp", fmt.Sprintf("%s:%d", h.Addr, port))
		if e := unix.Setns(int(back.Fd()), unix.CLONE_NEWNET); e == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
	return ln, err
}
