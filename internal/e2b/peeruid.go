package e2b

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// The debug listener asks the kernel who owns the client's end of a loopback connection. It asks
// sock_diag for that one socket (as ss does), by its exact addresses and ports: the answer is
// atomic. Reading /proc/net/tcp instead, as identd does, walks the kernel's socket table in pages
// while other sockets come and go, and can skip the very socket it looks for; under the churn of a
// busy machine that once turned a debug-mode request into a 401.

// loopbackPeerUID finds the user owning the client socket of a loopback TCP connection from
// remote (the client's address) to local (ours).
func loopbackPeerUID(remote string, local net.Addr) (uint32, error) {
	if local == nil {
		return 0, fmt.Errorf("no local address")
	}
	ra, err := netip.ParseAddrPort(remote)
	if err != nil {
		return 0, err
	}
	la, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return 0, err
	}
	if !ra.Addr().IsLoopback() && !ra.Addr().Unmap().IsLoopback() {
		return 0, fmt.Errorf("%s is not on this machine", remote)
	}
	// The client's socket is of its own family: a v4-mapped address on our IPv6 socket is an
	// IPv4 client.
	src := netip.AddrPortFrom(ra.Addr().Unmap(), ra.Port())
	dst := netip.AddrPortFrom(la.Addr().Unmap(), la.Port())
	if src.Addr().Is4() != dst.Addr().Is4() {
		return 0, fmt.Errorf("%s and %s are not of one address family", remote, local)
	}
	return sockDiagUID(src, dst)
}

// Sizes and offsets of the kernel's inet_diag structures (linux/inet_diag.h).
const (
	inetDiagSockIDLen = 48 // sport, dport, src[4], dst[4], if, cookie[2]
	inetDiagReqV2Len  = 8 + inetDiagSockIDLen
	inetDiagMsgUIDOff = 4 + inetDiagSockIDLen + 12 // family, state, timer, retrans; id; expires, rqueue, wqueue
)

// sockDiagUID asks NETLINK_SOCK_DIAG for the TCP socket bound to src and connected to dst and
// returns its owner.
func sockDiagUID(src, dst netip.AddrPort) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	// One request for exactly that socket (no NLM_F_DUMP): the kernel looks it up by its
	// four-tuple and answers with it or with ENOENT.
	req := make([]byte, unix.NLMSG_HDRLEN+inetDiagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	body := req[unix.NLMSG_HDRLEN:]
	family := byte(unix.AF_INET6)
	if src.Addr().Is4() {
		family = unix.AF_INET
	}
	body[0] = family
	body[1] = unix.IPPROTO_TCP
	ne.PutUint32(body[4:], ^uint32(0)) // idiag_states: any (a client may have half-closed)
	id := body[8:]
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putAddr(id[4:20], src.Addr())
	putAddr(id[20:36], dst.Addr())
	ne.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], ^uint32(0))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := -int32(ne.Uint32(m.Data)); errno != 0 {
					if syscall.Errno(errno) == syscall.ENOENT {
						return 0, fmt.Errorf("no connected socket %s → %s", src, dst)
					}
					return 0, fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
				}
			}
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(m.Data) < inetDiagMsgUIDOff+4 {
				return 0, errors.New("sock_diag: short answer")
			}
			// A socket in TIME_WAIT has no owner left (the kernel reports 0, root's uid).
			if m.Data[1] == unix.BPF_TCP_TIME_WAIT {
				return 0, fmt.Errorf("the socket %s → %s is closed", src, dst)
			}
			return ne.Uint32(m.Data[inetDiagMsgUIDOff:]), nil
		}
	}
	return 0, errors.New("sock_diag: no answer")
}

// putAddr writes a as inet_diag_sockid holds it: network order, IPv4 in the first word.
func putAddr(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}
