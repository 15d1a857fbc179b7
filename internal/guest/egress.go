//go:build linux

package guest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/guest/tunnel"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// systemBundle is the image's trust store (Debian's ca-certificates). The gateway's CA is added
// to it inside the sandbox, so every client that trusts the system (Python's ssl, requests,
// curl, pip) trusts the interception; the environment points the rest at it too.
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// egress is the guest's side of the way out: a listener on the sandbox's loopback whose
// connections become tunnel streams to the daemon.
type egress struct {
	mu  sync.Mutex
	mux *tunnel.Mux
	ln  net.Listener
}

// enableEgress installs the CA and starts the proxy port. Enabling twice is harmless.
func (a *agent) enableEgress(ca []byte, port int) error {
	a.egress.mu.Lock()
	defer a.egress.mu.Unlock()
	if a.egress.ln != nil {
		return nil
	}
	if port <= 0 || port > 65535 {
		return &proto.Error{Kind: sandbox.KindInvalidRequest, Message: "egress: bad port " + strconv.Itoa(port)}
	}
	if len(ca) == 0 || !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
		return &proto.Error{Kind: sandbox.KindInvalidRequest, Message: "egress: no CA certificate"}
	}
	if err := addTrust(ca); err != nil {
		return &proto.Error{Kind: sandbox.KindInternal, Message: "egress: " + err.Error()}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return &proto.Error{Kind: sandbox.KindInternal, Message: "egress: " + err.Error()}
	}
	a.egress.ln = ln
	a.egress.mux = a.tunnel()
	go a.acceptEgress(ln, a.egress.mux)
	return nil
}

// tunnel is the agent's mux; it opens streams, and never accepts any.
func (a *agent) tunnel() *tunnel.Mux {
	return tunnel.New(func(f tunnel.Frame) error { return a.send(proto.TunnelFrame(f)) }, nil)
}

func (a *agent) acceptEgress(ln net.Listener, mux *tunnel.Mux) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Printf("egress: accept: %v", err)
			}
			return
		}
		go func() {
			s, err := mux.Open()
			if err != nil {
				log.Printf("egress: %v", err)
				c.Close()
				return
			}
			splice(c, s)
		}()
	}
}

// splice copies both ways until either side ends, then closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}

// handleTunnel passes a stream frame to the mux. Frames for a tunnel never opened are ignored.
func (a *agent) handleTunnel(f *proto.Frame) error {
	t, _ := f.AsTunnel()
	a.egress.mu.Lock()
	mux := a.egress.mux
	a.egress.mu.Unlock()
	if mux == nil {
		return nil
	}
	return mux.Handle(t)
}

// addTrust appends ca to the system bundle (once).
func addTrust(ca []byte) error {
	cur, err := os.ReadFile(systemBundle)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if bytes.Contains(cur, bytes.TrimSpace(ca)) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(systemBundle), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(systemBundle, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "\n# agentbox egress gateway\n%s\n", bytes.TrimSpace(ca)); err != nil {
		return err
	}
	return nil
}
