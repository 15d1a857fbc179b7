// Package sharedstore is the storage every node of a cluster sees (issue 18, "sessions survive a
// node"): the sessions' records, with an ownership operation that exactly one node wins, and the
// content-addressed store of their snapshots (package snapstore), so that any node can resume any
// session from its latest durable step.
//
// Ownership is fenced by epochs, the token scheme of leases: a session's record carries the node
// that owns it and an epoch that grows by one with every adoption. A node writes a session's
// record only at the epoch it won; once another node has claimed a later epoch, every write of
// the earlier one fails with ErrFenced (and changes nothing the new owner reads), so a node that
// comes back after it was given up for dead cannot overwrite a session another node now owns.
//
// Dir is the implementation on a directory every node mounts (a local directory for nodes on one
// machine, NFS or a shared volume across machines). Each epoch is a file of its own, created with
// link(2), which fails when the name exists: of concurrent claims of the same epoch exactly one
// creates the file. S3 is the implementation on a bucket of an S3-compatible server: each epoch
// is an object created with a conditional PUT (If-None-Match: *), which exactly one of
// concurrent writers wins, rewritten with If-Match on the ETag read; its snapshots go through a
// node-local cache into the bucket (snapstore.OpenCache). OpenURL opens either from the
// configuration (s3://BUCKET/PREFIX, or a directory).
package sharedstore
