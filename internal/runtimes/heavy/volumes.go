package heavy

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

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
}

// lostFound is ext4's own directory at a volume's root: not the user's, never copied.
const lostFound = "lost+found"

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
		n, err := tarVolume(m.Source, f)
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
		added += a
		out = append(out, checkpointVolume{Volume: m.Volume, Path: m.Path, Blob: d, Bytes: n})
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
			err = untarVolume(mounts[i].Source, p)
		}
		os.RemoveAll(tmp)
		if err != nil {
			return sandbox.Errorf(sandbox.KindConflict, "restoring volume %q's files from the session's checkpoint: %v", v.Volume, err)
		}
	}
	return nil
}

// tarVolume writes the files under dir (symbolic links as links, never followed; ext4's
// lost+found left out) as a PAX tar, and returns the bytes of file contents.
func tarVolume(dir string, w io.Writer) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == lostFound {
			return fs.SkipDir
		}
		info, err := root.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = root.Readlink(p); err != nil {
				return err
			}
		case info.IsDir(), info.Mode().IsRegular():
		default:
			return nil // sockets, pipes, devices (nodev): nothing a restore needs
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name, h.Format = p, tar.FormatPAX
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		if !info.Mode().IsRegular() {
			return tw.WriteHeader(h)
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		n, err := io.CopyN(tw, f, h.Size)
		total += n
		return err
	})
	if err != nil {
		return total, err
	}
	return total, tw.Close()
}

// untarVolume replaces the files under dir (but lost+found) with those of the tar at path,
// keeping their modes, owners and modification times. Every path goes through an os.Root, so an
// entry cannot lead outside dir.
func untarVolume(dir, path string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() != lostFound {
			if err := root.RemoveAll(e.Name()); err != nil {
				return err
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirs []dirTime
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || !fs.ValidPath(name) || name == lostFound || strings.HasPrefix(name, lostFound+"/") {
			return fmt.Errorf("tar entry %q is not a path below the volume", h.Name)
		}
		mode := fs.FileMode(h.Mode).Perm() | fs.FileMode(h.Mode)&fs.ModeSticky
		switch h.Typeflag {
		case tar.TypeDir:
			if name != "." {
				if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
			}
			dirs = append(dirs, dirTime{name, h.ModTime})
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
			if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.CopyN(out, tr, h.Size)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			continue
		}
		if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := root.Chmod(name, mode); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := root.Chtimes(name, h.AccessTime, h.ModTime); err != nil {
				return err
			}
		}
	}
	// Directories last, deepest first: making their entries changed their times.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t); err != nil {
			return err
		}
	}
	return nil
}
