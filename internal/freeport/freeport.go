package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// The range Loopback picks from: below the ephemeral range's default start (32768), below the
// local Nomad cluster's ports (20000–31999, scripts/cluster/nomad-local.sh) and above the local
// Kubernetes cluster's fixed ones (10348–16443, scripts/cluster/kube-local.sh).
const (
	rangeLow  = 17000
	rangeHigh = 20000 // exclusive
)

// Loopback returns n distinct ports on 127.0.0.1 that are free now, below the kernel's
// ephemeral range. Where that range starts at or below rangeHigh (a tuned kernel), it falls
// back to ports the kernel picks (port 0), which is what it can do.
func Loopback(n int) ([]int, error) {
	if ephemeralLow() <= rangeHigh {
		return fromKernel(n)
	}
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("freeport: %d ports free in %d–%d not found in %d tries", n, rangeLow, rangeHigh-1, tries)
		}
		p := rangeLow + rand.IntN(rangeHigh-rangeLow)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // in use
		}
		ln.Close()
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when unreadable).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		if lo, err := strconv.Atoi(f[0]); err == nil {
			return lo
		}
	}
	return 32768
}

func fromKernel(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are picked, so that none is picked twice
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
