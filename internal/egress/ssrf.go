package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// blocked are the networks no sandbox may reach through the proxy: the host itself, private
// networks, link-local (cloud metadata services live at 169.254.169.254 and fd00:ec2::254),
// carrier-grade NAT, unique-local IPv6, multicast, broadcast and the unspecified address.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",      // "this network", unspecified
		"10.0.0.0/8",     // RFC 1918
		"100.64.0.0/10",  // CGNAT (RFC 6598)
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local, cloud metadata
		"172.16.0.0/12",  // RFC 1918
		"192.0.0.0/24",   // IETF protocol assignments
		"192.168.0.0/16", // RFC 1918
		"198.18.0.0/15",  // benchmarking
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, broadcast
		"::/128",         // unspecified
		"::1/128",        // loopback
		"64:ff9b::/96",   // NAT64: embeds IPv4 addresses
		"64:ff9b:1::/48", // local-use NAT64
		"100::/64",       // discard
		"2001:db8::/32",  // documentation
		"2002::/16",      // 6to4: embeds IPv4 addresses
		"fc00::/7",       // unique local (fd00:ec2::254 is AWS's metadata)
		"fe80::/10",      // link-local
		"ff00::/8",       // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// checkAddr refuses an address in a blocked network unless allow lists it. IPv4-mapped and
// IPv4-compatible IPv6 forms are checked as the IPv4 address they carry.
func checkAddr(ip netip.Addr, allow []*net.IPNet) error {
	ip = ip.Unmap()
	if ip.Is6() && ip.As16()[0] == 0 && ip.As16()[1] == 0 {
		// ::a.b.c.d (IPv4-compatible, deprecated but still routed by some stacks)
		b := ip.As16()
		if b[2]|b[3]|b[4]|b[5]|b[6]|b[7]|b[8]|b[9]|b[10]|b[11] == 0 && !ip.IsLoopback() && !ip.IsUnspecified() {
			ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		}
	}
	if ip.Zone() != "" {
		return fmt.Errorf("address %s has a zone: refused", ip)
	}
	for _, n := range allow {
		if n.Contains(net.IP(ip.AsSlice())) {
			return nil
		}
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return fmt.Errorf("%s is in %s (%s)", ip, p, blockedName(p))
		}
	}
	return nil
}

func blockedName(p netip.Prefix) string {
	switch p.String() {
	case "127.0.0.0/8", "::1/128":
		return "loopback"
	case "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16":
		return "private network"
	case "169.254.0.0/16", "fe80::/10":
		return "link-local, where cloud metadata services live"
	case "100.64.0.0/10":
		return "carrier-grade NAT"
	case "fc00::/7":
		return "unique local"
	case "224.0.0.0/4", "ff00::/8":
		return "multicast"
	case "0.0.0.0/8", "::/128":
		return "unspecified"
	}
	return "reserved"
}

// Resolver looks up a host's addresses. *net.Resolver implements it; tests give a fixed table.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// SSRFError is a connection the guard refused.
type SSRFError struct {
	Host   string
	Reason string
}

func (e *SSRFError) Error() string { return fmt.Sprintf("egress to %s refused: %s", e.Host, e.Reason) }

// dialer resolves names itself, checks every address and connects to the very address it
// checked: a name that resolves to a public address at the check and a private one at the
// connect (DNS rebinding) cannot happen, since there is no second look-up.
type dialer struct {
	resolver Resolver
	timeout  time.Duration
	// dial connects to a checked address; net.Dialer.DialContext by default. Tests may route.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// dialChecked connects to host:port under profile p's SSRF rules. It returns the address used.
func (d *dialer) dialChecked(ctx context.Context, p *Profile, host string, port int, explicitPort bool) (net.Conn, netip.Addr, error) {
	if slices.Contains(p.DangerousPorts, port) && !explicitPort {
		return nil, netip.Addr{}, &SSRFError{Host: host, Reason: fmt.Sprintf("port %d is a dangerous port (allow it with a rule that names the port)", port)}
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := checkAddr(ip, p.allowPrivate); err != nil {
			return nil, netip.Addr{}, &SSRFError{Host: host, Reason: "address " + err.Error()}
		}
		addrs = []netip.Addr{ip}
	} else {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err = d.resolver.LookupNetIP(lctx, "ip", host)
		cancel()
		if err != nil {
			return nil, netip.Addr{}, &SSRFError{Host: host, Reason: fmt.Sprintf("cannot resolve %s: %v", host, err)}
		}
		if len(addrs) == 0 {
			return nil, netip.Addr{}, &SSRFError{Host: host, Reason: "the name has no addresses"}
		}
	}
	// Every address must pass: a name that mixes a public and a private address is refused as a
	// whole, so a client cannot fall back onto the private one.
	for _, a := range addrs {
		if err := checkAddr(a, p.allowPrivate); err != nil {
			return nil, netip.Addr{}, &SSRFError{Host: host, Reason: fmt.Sprintf("%s resolves to %v", host, err)}
		}
	}
	var last error
	for _, a := range addrs {
		c, err := d.dial(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), strconv.Itoa(port)))
		if err == nil {
			return c, a, nil
		}
		last = err
	}
	return nil, netip.Addr{}, fmt.Errorf("connect to %s: %w", host, last)
}
