// Package netns makes a network namespace that looks like a host on the internet: one address
// from TEST-NET-3, linked to this host's namespace by a veth pair. Tests (through
// internal/testenv) and benchmarks serve upstreams from it, so egress is exercised without a
// real network and without bypassing the SSRF guard, which refuses loopback and private ranges.
package netns
