// Package freeport picks loopback TCP ports for a child process to listen on (a SeaweedFS
// server, a Nomad agent, a node daemon a test or a bench starts).
//
// A port taken from a listener on port 0 and closed again lies in the kernel's ephemeral range
// (ip_local_port_range, 32768–60999 by default), where the kernel hands out ports at any moment
// to outgoing connections and to other listeners on port 0: between the close and the child's
// bind one of them can take it, and the child then fails to start. Ports below that range are
// only ever taken by a program that asks for them by number. The scripts that start local
// clusters keep their ports below it too (scripts/cluster/nomad-local.sh).
package freeport
