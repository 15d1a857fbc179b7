package netns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
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
func NewPublicHost() (*PublicHost, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("netns: ip(8) is not installed (apt-get install iproute2)")
	}
	// A /30 of TEST-NET-3 per host: .4k+1 on the host's side, .4k+2 in the namespace.
	k := rand.IntN(60) + 1
	id := fmt.Sprintf("%04x", rand.IntN(1<<16))
	ns, hostIf, nsIf := "abx-"+id, "abh"+id, "abn"+id
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
