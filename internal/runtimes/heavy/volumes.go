package heavy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentbox-dev/agentbox/internal/dirtar"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

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

// errVolumes refuses what a session with a read-write volume cannot do: a fork would be the
// volume's second writer.
func errVolumes(what, volume string) error {
	return sandbox.Errorf(sandbox.KindConflict, "a heavy session holding volume %q read-write cannot %s: a volume has one writer at a time", volume, what).
		WithHint("fork a session that mounts its volumes read-only (\"/path:ro\"), or copy the files into the session's own directory first")
}

// A volume's files travel with the session's checkpoints (a pause, a durable step), so that a
// session restored elsewhere (another node, or this one after a kill -9 and files written since)
// finds its read-write volumes as they were when its checkpoint was taken: each read-write
// mount's host directory is a tar blob the manifest names (so the store's collection keeps it),
// taken with no request in flight to the guest, and a Restore extracts it into the newly attached
// mount before `runsc restore`. gVisor's gofer re-opens a restored sandbox's files by path (it
// keeps no inode numbers across a checkpoint), so files re-created at the same paths with the same
// sizes and modification times (PAX headers keep nanoseconds) are the files it had open.
// Read-only mounts are not copied: no session can have changed them while the reader holds them.

// checkpointVolume is a read-write volume's files in a checkpoint's manifest.
type checkpointVolume struct {
	Volume string `json:"volume"`
	Path   string `json:"path"` // where the session mounts it
	Blob   string `json:"blob"` // a tar of its files, a blob of the snapshot store
	Bytes  int64  `json:"bytes"`
	// Content is a manifest naming only Blob: the volume's content as the core's volume store
	// keeps it (sandbox.SnapshotRef.Volumes).
	Content string `json:"content,omitempty"`
}

// VolumeContentKind is the body of a volume content's manifest (package volumes writes the same).
const volumeContentKind = `{"kind":"volume-content/1"}`

// contents are the volumes' contents by name, for the SnapshotRef.
func contents(vols []checkpointVolume) map[string]string {
	if len(vols) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, v := range vols {
		out[v.Volume] = v.Content
	}
	return out
}

// putVolumes stores the files of each read-write mount as a tar blob.
func putVolumes(store *snapstore.Store, mounts []sandbox.Mount) ([]checkpointVolume, int64, error) {
	var out []checkpointVolume
	var added int64
	for _, m := range mounts {
		if m.ReadOnly {
			continue
		}
		f, err := os.CreateTemp(store.TmpDir(), "volume-*.tar")
		if err != nil {
			return nil, 0, err
		}
		n, err := dirtar.Write(m.Source, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
			return nil, 0, fmt.Errorf("heavy: copying volume %q: %w", m.Volume, err)
		}
		d, a, err := store.PutFile(f.Name())
		if err != nil {
			os.Remove(f.Name())
			return nil, 0, err
		}
		content, b, err := store.PutManifest([]string{d}, []byte(volumeContentKind))
		if err != nil {
			return nil, 0, err
		}
		added += a + b
		out = append(out, checkpointVolume{Volume: m.Volume, Path: m.Path, Blob: d, Bytes: n, Content: content})
	}
	return out, added, nil
}

// refillVolumes gives each read-write mount the files its checkpoint kept, replacing what it has.
func refillVolumes(store *snapstore.Store, mounts []sandbox.Mount, vols []checkpointVolume) error {
	for _, v := range vols {
		i := slices.IndexFunc(mounts, func(m sandbox.Mount) bool { return m.Path == v.Path })
		if i < 0 || mounts[i].ReadOnly {
			return sandbox.Errorf(sandbox.KindConflict, "the session's checkpoint holds volume %q read-write at %s, which the restored session does not mount read-write", v.Volume, v.Path).
				WithHint("restore the session with its volumes as it was created")
		}
		tmp, err := os.MkdirTemp(store.TmpDir(), "volume-")
		if err != nil {
			return err
		}
		p := filepath.Join(tmp, "v.tar")
		err = store.LinkBlob(v.Blob, p)
		if err == nil {
			err = dirtar.Extract(mounts[i].Source, p)
		}
		os.RemoveAll(tmp)
		if err != nil {
			return sandbox.Errorf(sandbox.KindConflict, "restoring volume %q's files from the session's checkpoint: %v", v.Volume, err)
		}
	}
	return nil
}
