package e2b

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// acceptPair returns both ends of a fresh connection to a listener on addr.
func acceptPair(t *testing.T, ln net.Listener, dial func() (net.Conn, error)) (client, server net.Conn) {
	t.Helper()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- nil
			return
		}
		done <- c
	}()
	client, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	server = <-done
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

func TestLoopbackPeerUIDIsTheClientsUser(t *testing.T) {
	for _, network := range []struct{ net, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(network.net, func(t *testing.T) {
			ln, err := net.Listen(network.net, network.addr)
			if err != nil {
				t.Skipf("no %s loopback here: %v", network.net, err)
			}
			defer ln.Close()
			client, server := acceptPair(t, ln, func() (net.Conn, error) { return net.Dial(network.net, ln.Addr().String()) })
			defer client.Close()
			defer server.Close()
			uid, err := loopbackPeerUID(server.RemoteAddr().String(), server.LocalAddr())
			if err != nil {
				t.Fatal(err)
			}
			if uid != uint32(os.Getuid()) {
				t.Fatalf("uid %d, want %d", uid, os.Getuid())
			}
		})
	}
}

// The lookup names the user of the process at the other end, not the daemon's: a process of
// another user is refused by peerAllowed.
func TestLoopbackPeerUIDOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A child running as nobody connects and waits for us to close.
	cmd := exec.Command("/bin/bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/$1; read -r -u 3`, "bash", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	uid, err := loopbackPeerUID(server.RemoteAddr().String(), server.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	if uid != 65534 {
		t.Fatalf("uid %d, want 65534", uid)
	}
}

// Sockets opened and closed around the one looked up never hide it (reading /proc/net/tcp in
// pages could).
func TestLoopbackPeerUIDUnderChurn(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, server := acceptPair(t, ln, func() (net.Conn, error) { return net.Dial("tcp4", ln.Addr().String()) })
	defer client.Close()
	defer server.Close()

	churn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer churn.Close()
	go func() {
		for {
			c, err := churn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, err := net.Dial("tcp4", churn.Addr().String()); err == nil {
					c.Close()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 2000 {
		if _, err := loopbackPeerUID(server.RemoteAddr().String(), server.LocalAddr()); err != nil {
			t.Fatalf("lookup %d: %v", i, err)
		}
	}
}

func TestLoopbackPeerUIDRefusesOtherHosts(t *testing.T) {
	if _, err := loopbackPeerUID("192.0.2.1:5000", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}); err == nil {
		t.Fatal("a remote address was looked up")
	}
}
