// Package audit is agentbox's tamper-evident audit log: an append-only JSONL file whose lines
// are the leaves of a Merkle tree (golang.org/x/mod/sumdb/tlog), with Ed25519-signed checkpoints
// of the tree, a verifier that names the first altered or missing record, and a query.
//
// # Files
//
// DATA_DIR/audit/ (0700) holds:
//
//	audit.jsonl        the records, one JSON object per line (0600, opened O_APPEND)
//	audit.checkpoints  the signed tree heads, one JSON object per line (0600)
//	signing.key        the Ed25519 signing key, in sumdb/note's text form (0600), made on first start
//	signing.pub        its verifier key (0644); keep a copy elsewhere and verify with it
//	daemon.running     while a daemon runs: a journal of its open sessions, a snapshot then one line a change (internal/daemon/restart.go)
//
// # Records
//
// A record is one line (see Record):
//
//	{"seq":17,"time":"2026-11-22T08:40:00.123456789Z","kind":"run","session":"sb_…","decision":"allow",
//	 "run":{"code_sha256":"…","code_bytes":42,"tier":"nano","reasons":["nano: imports only json (all in nano)"],
//	        "limits":{"timeout_ms":30000,…},"outcome":"ok","exit_code":0,"duration_ms":3.2},
//	 "prev":"<hash of record 16>","hash":"<hash of this line without its hash field>"}
//
// seq is the record's position (0-based) and its leaf index in the tree; time is UTC RFC 3339
// with nanoseconds; kind is session.create, session.close, session.expire, run, egress,
// policy.change, alert, log.repair, daemon.restart or mcp.call, mcp.pin, mcp.approve, mcp.refused, mcp.read, mcp.prompt, mcp.list,
// with one object of that kind's fields (run, lifecycle, egress, policy, alert, repair, restart,
// mcp). The leaf data is the line's exact bytes,
// without the newline. The Manager writes sessions, runs, intents and egress policy reloads
// (sandbox.AuditSink); the daemon writes the egress gateway's decisions and alerts
// (internal/daemon/audit.go), and at start, after a daemon that did not shut down cleanly, a
// daemon.restart with the sessions that one lost and a session.close for each
// (internal/daemon/restart.go); and the hosted MCP servers' gateway its calls, pins and approvals
// (internal/daemon/mcphost.go). decision uses common words across kinds: allow, deny, and for
// egress also redact and warn.
//
// Every record carries two hashes besides the tree: hash, the SHA-256 of the line with its hash
// field cut off (the bytes as written, so verifying never re-encodes JSON), and prev, the hash of
// the record before. The tree and the signatures make the log tamper-evident; the two hashes make
// a naive edit point at the record it changed, which a root alone cannot do.
//
// # Checkpoints
//
// A checkpoint (see Checkpoint) is a signed note (golang.org/x/mod/sumdb/note, the Go checksum
// database's format, which C2SP's signed-note and tlog-checkpoint specify) over the tree size,
// root hash and time. Open signs one every CheckpointRecords records (default 256) or
// CheckpointInterval (default 10 s), whichever comes first, at Open when a crash left records
// unsigned, and at Close. Checkpoints live in their own file, not among the records: a record's
// seq stays its leaf index, a query never skips them, and the small file can be copied off the
// machine (to a witness) on its own.
//
// # Durability
//
// Each record is one write(2) of one line to a file opened O_APPEND, so a daemon that is killed
// loses nothing it appended: the kernel has the bytes. The file is fsynced before each checkpoint
// (and the checkpoint file after it), so a checkpoint never covers records a crash of the machine
// could lose; between checkpoints a power loss can lose at most the last CheckpointInterval of
// records. Options.SyncEveryRecord fsyncs every record instead. Measured here (2 cores, ext4 on a
// virtual disk, BenchmarkAppend, 2026-11-22): 11 µs per run record with the checkpoint's fsync
// and signature spread over 256 records, 0.23 ms with an fsync per record, 20x. The daemon
// appends once per run, whose own cost is milliseconds, so either is affordable; the default
// keeps the lock short.
//
// A write a crash cut short leaves a last line without its newline. Verify reports it as a
// warning when no checkpoint covers it (a crash, not tampering) and as a problem when one does
// (a signed record cannot be cut short by a crash). Open cuts it and appends a log.repair record
// with the cut bytes' length, hash and start.
//
// # The tree in memory
//
// The log keeps only the tree's right edge (one hash per level, see frontier): that is all
// tlog needs to add a leaf and compute a root. Open rebuilds it by reading the whole file, which
// it does anyway to verify the log before appending to it: 0.65–1.0 s for 100 000 records here
// (BenchmarkOpen1e5; BenchmarkVerify1e5 0.78 s, 8 µs per record, mostly JSON decoding and
// hashing; the machine's load moves these by ±30%). A file of stored hashes would make Open
// constant-time and allow inclusion proofs; it is the next step when logs reach millions of
// records (or rotate the log then).
//
// # Verification
//
// Verify (and Open) walk the records once. For each line: the line must be a record whose hash
// matches its bytes ("record 17 (line 18) was altered"); its seq must follow the records before
// (a jump names the missing records, a jump back a record out of place, and two records
// swapped are named as such); its prev must be the hash of the line before (a break means the
// record before was rewritten with a hash of its own). The line is added to the tree; whenever the
// tree reaches a checkpoint's size its root must equal the signed root. Every checkpoint's
// signature is checked with the public key, and its plain fields against the signed ones; a
// checkpoint larger than the file means the log was truncated.
//
// What it detects: any change to a record covered by a checkpoint, whoever made it, as long as
// the signing key was not used to sign a forged checkpoint; removed, inserted, duplicated and
// reordered records; truncation below the last checkpoint; forged or edited checkpoints. A naive
// edit (without recomputing hashes) is named exactly, signed or not. An edit that recomputes the
// record's hash and the whole chain after it is caught by the first checkpoint after it, and
// named as "a record among" the span since the last checkpoint that matched.
//
// What it cannot detect: a consistent rewrite (hashes and chain recomputed) or a truncation of
// the records after the last checkpoint, which only the chain vouches for (at most
// CheckpointInterval of records, or none after a clean Close); anything done by someone who can
// read signing.key, which lives on the same machine: for evidence that survives root on this
// machine, copy signing.pub and the checkpoints elsewhere as they are written, and verify against
// those copies.
package audit
