package heavy

import (
	"context"
	"maps"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/guest/tunnel"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Egress is the daemon's egress gateway as the heavy tier sees it: where a sandbox's connections
// go, and the CA the sandbox must trust. The runtime owns this interface; package egress's
// Gateway implements it through the daemon.
type Egress interface {
	// Serve takes one connection from a sandbox of session (a session ID, or a one-shot run's
	// ID) under the named egress profile. It returns at once and closes c when done.
	Serve(c net.Conn, session, profile string) error
	// CA is the PEM certificate the sandbox must trust for TLS interception.
	CA() []byte
	// CheckProfile reports an unknown profile name as an error that lists the known ones.
	CheckProfile(name string) error
}

// ProxyPort is where the guest listens on the sandbox's loopback for the code's proxy
// connections.
const ProxyPort = 3128

// proxyEnv is the environment that points clients at the proxy. The trust store is the system's,
// with the gateway's CA added by the guest.
var proxyEnv = func() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	bundle := "/etc/ssl/certs/ca-certificates.crt"
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"ALL_PROXY": u, "all_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
		"SSL_CERT_FILE": bundle, "REQUESTS_CA_BUNDLE": bundle, "CURL_CA_BUNDLE": bundle,
		"PIP_CERT": bundle, "NODE_EXTRA_CA_CERTS": bundle,
	}
}()

// boxEgress is what a box knows of its way out.
type boxEgress struct {
	mu      sync.Mutex
	mux     *tunnel.Mux
	session string
	profile string
	on      bool
	// warned is when a refused connection was last logged: the code can knock on the proxy port
	// after an install closed its way out as often as it likes, and the log says so once a second.
	warned time.Time
}

// warnRefused logs a refused connection, at most once a second per sandbox.
func (b *box) warnRefused(msg string, args ...any) {
	b.egress.mu.Lock()
	now := time.Now()
	quiet := now.Sub(b.egress.warned) < time.Second
	if !quiet {
		b.egress.warned = now
	}
	b.egress.mu.Unlock()
	if !quiet {
		b.log.Warn(msg, args...)
	}
}

// newTunnel makes the box's tunnel: streams the guest opens go to the gateway as the box's
// session, or are refused while egress is off.
func (b *box) newTunnel(gw Egress) *tunnel.Mux {
	return tunnel.New(
		func(f tunnel.Frame) error { return b.write(proto.TunnelFrame(f)) },
		func(c net.Conn) {
			b.egress.mu.Lock()
			on, session, profile := b.egress.on, b.egress.session, b.egress.profile
			b.egress.mu.Unlock()
			// The guest opens a stream only for a connection its proxy port accepted: each close
			// here is a connection the code sees hung up on without an answer, so it is logged
			// with the reason.
			if !on || gw == nil {
				b.warnRefused("heavy: a connection to the egress proxy while the sandbox has no way out, closed", "session", session, "egress_on", on, "gateway", gw != nil)
				c.Close()
				return
			}
			if err := gw.Serve(c, session, profile); err != nil {
				b.warnRefused("heavy: the egress gateway did not take a connection, closed", "session", session, "err", err)
				c.Close()
			}
		})
}

// enableEgress opens the box's way out through the gateway, as session under profile.
func (rt *Runtime) enableEgress(ctx context.Context, b *box, session, profile string) error {
	if err := rt.checkEgress(profile); err != nil {
		return err
	}
	b.egress.mu.Lock()
	b.egress.session, b.egress.profile, b.egress.on = session, profile, true
	b.egress.mu.Unlock()
	if _, err := b.request(ctx, &proto.Frame{Op: proto.OpEgress, CA: rt.opts.Egress.CA(), Port: ProxyPort}); err != nil {
		return err
	}
	return nil
}

// envFor lays the proxy settings under a run's environment when the box has a way out.
func (b *box) envFor(env map[string]string) map[string]string {
	b.egress.mu.Lock()
	on := b.egress.on
	b.egress.mu.Unlock()
	if !on {
		return env
	}
	out := maps.Clone(proxyEnv)
	maps.Copy(out, env)
	return out
}

// checkEgress refuses network for a daemon without a gateway or an unknown profile, before a
// sandbox is taken for the request.
func (rt *Runtime) checkEgress(profile string) error {
	if rt.opts.Egress == nil {
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "this daemon has no egress gateway, so sandboxes have no network").
			WithHint("run without network, or enable egress in the daemon's configuration")
	}
	if err := rt.opts.Egress.CheckProfile(profile); err != nil {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "%v", err).WithHint("name one of the daemon's egress profiles in egress_profile")
	}
	return nil
}
