package heavy

import "github.com/agentbox-dev/agentbox/internal/sandbox"

// Volumes: the core takes a volume's lease and loop-mounts it on the host (package volumes); the
// heavy tier binds that host directory into the sandbox at the session's path. gVisor's gofer
// serves the bind, so the sandbox's writes land in the volume's ext4 file system, whose size is
// the quota: a write past it fails inside the sandbox with ENOSPC. nosuid and nodev hold inside
// as they do on the host.

// volumeMounts are the OCI bind mounts of a session's volumes.
func volumeMounts(vs []sandbox.Mount) []ociMount {
	var out []ociMount
	for _, v := range vs {
		o := []string{"rbind", "nosuid", "nodev"}
		if v.ReadOnly {
			o = append(o, "ro")
		} else {
			o = append(o, "rw")
		}
		out = append(out, ociMount{Destination: v.Path, Type: "bind", Source: v.Source, Options: o})
	}
	return out
}

// errVolumes refuses what a session with volumes cannot do: a pause or a fork would restore the
// sandbox without the volume's lease (or, for a fork, a second writer).
func errVolumes(what string) error {
	return sandbox.Errorf(sandbox.KindInvalidRequest, "a heavy session with volumes cannot %s", what).
		WithHint("close the session when done (the volume keeps its files); fork or pause a session without volumes")
}
