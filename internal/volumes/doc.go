// Package volumes keeps named volumes on disk: each is an ext4 file system in an image file of
// its quota's size, under the daemon's data directory, owned by one tenant. A session mounts a
// volume through a lease: the image is loop-mounted on the host while any lease holds it, and the
// heavy tier binds that directory into its gVisor sandbox. One read-write lease or any number of
// read-only ones hold a volume at a time.
//
// Why an image file: the quota must hold against code that writes as fast as it can, from inside
// a sandbox whose writes reach the host through gVisor's gofer. A file system of the quota's size
// refuses the write past it with ENOSPC where the write happens (inside the sandbox, or in the
// files API), without a watcher racing the writer, and what was written before stays. Directory
// quotas (ext4 project quotas, XFS) would need the data directory on such a file system; a
// loop-mounted image needs only root and a loop device, which the heavy tier needs anyway. The
// price is the file system's own metadata: a volume holds a little less than its quota (about
// 5% at 16 MiB, under 2% from 256 MiB), and its image takes the quota's size on disk at once
// only where blocks are written (the image is sparse).
//
// On a node of a cluster (Options.Cluster, cluster.go) the volumes are the cluster's: their
// records (meta, the read-write lease's holder session, the latest content) live in the shared
// store beside the sessions', fenced the same way, and each node's images are a cache of the
// content, so a volume is used from any node and a session moves with it.
package volumes
