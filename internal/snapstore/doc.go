// Package snapstore keeps sessions' durable snapshots under the daemon's data directory as a
// content-addressed store, shaped after containerd's content store: blobs named by the SHA-256 of
// their bytes, written once (a second Put of the same bytes costs a stat), and garbage-collected
// by reference. A manifest is a blob that names the blobs it needs; a tier writes one per
// snapshot and hands its digest (the snapshot's reference) to the Manager, which keeps the
// references of the snapshots it still wants and calls GC with them as roots.
//
// Both tiers share one store, so a page or a file that two snapshots hold is stored once.
//
// Writes go to a temporary file renamed into place, so a daemon killed mid-write (kill -9)
// leaves either the whole blob or none. They are not fsynced: a snapshot is meant to survive the
// daemon, not the machine's power (RATIONALE.md, "Time travel").
package snapstore
