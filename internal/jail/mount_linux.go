package jail

import (
	"errors"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// stageCandidates are host directories one of which the new root's tmpfs is
// mounted over before pivot_root. The mount namespace is private, so covering
// one hides nothing from the host; the bind sources are captured as detached
// mount trees before, so they may live under it.
var stageCandidates = []string{"/tmp", "/mnt", "/run", "/var/tmp", "/opt", "/srv", "/root", "/proc"}

// rootOptions size the jail's root: it holds only mount points.
const rootOptions = "mode=0755,size=1m,nr_inodes=4096"

// detached is a source captured with open_tree(OPEN_TREE_CLONE): a private,
// read-only copy of a host mount, not yet attached anywhere.
type detached struct {
	fd     int
	target string
	dir    bool
}

// buildRoot replaces the process's file system view with a read-only tmpfs
// holding only the binds (and the binary's loader and libraries), and
// detaches the host's tree.
func buildRoot(spec *Spec, deps loaderDeps) (err error) {
	// No mount event may propagate back to the host, nor from it into the jail.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}

	var trees []detached
	defer func() {
		for _, t := range trees {
			unix.Close(t.fd)
		}
	}()
	const ro = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	for _, b := range spec.Binds {
		t, err := capture(b.Source, b.Target, ro|unix.MOUNT_ATTR_NOEXEC)
		if err != nil {
			return err
		}
		trees = append(trees, t)
	}
	// The loader and libraries must stay executable (mmap PROT_EXEC).
	for _, b := range deps.binds {
		for _, o := range spec.Binds {
			if overlaps(b.Target, o.Target) {
				return fmt.Errorf("bind target %s overlaps the binary's library %s", o.Target, b.Target)
			}
		}
		t, err := capture(b.Source, b.Target, ro)
		if err != nil {
			return err
		}
		trees = append(trees, t)
	}

	stage, err := pickStage()
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, rootOptions); err != nil {
		return fmt.Errorf("mount tmpfs root on %s: %w", stage, err)
	}
	for _, t := range trees {
		if err := attach(stage, t); err != nil {
			return err
		}
	}

	// pivot_root(".", ".") stacks the old root on top of the new one at ".",
	// where a lazy unmount detaches it: no put_old directory is left behind.
	if err := unix.Chdir(stage); err != nil {
		return fmt.Errorf("chdir to new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	// MS_BIND makes the remount change only this mount's flags.
	const flags = unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("", "/", "", flags, ""); err != nil {
		return fmt.Errorf("remount root read-only: %w", err)
	}
	return nil
}

// capture clones the mount at source (not its submounts) into a detached,
// private tree with the given attributes.
func capture(source, target string, attrs uint64) (detached, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return detached{}, fmt.Errorf("bind %s: open_tree: %w", source, err)
	}
	attr := unix.MountAttr{Attr_set: attrs, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return detached{}, fmt.Errorf("bind %s: mount_setattr: %w", source, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return detached{}, fmt.Errorf("bind %s: stat: %w", source, err)
	}
	return detached{fd: fd, target: target, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, nil
}

// attach creates the mount point for t under root and moves t onto it.
func attach(root string, t detached) error {
	where := root + t.target
	if err := os.MkdirAll(path.Dir(where), 0o755); err != nil {
		return fmt.Errorf("bind %s: %w", t.target, err)
	}
	if t.dir {
		if err := unix.Mkdir(where, 0o755); err != nil {
			return fmt.Errorf("bind %s: mkdir: %w", t.target, err)
		}
	} else {
		fd, err := unix.Open(where, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
		if err != nil {
			return fmt.Errorf("bind %s: create mount point: %w", t.target, err)
		}
		unix.Close(fd)
	}
	if err := unix.MoveMount(t.fd, "", unix.AT_FDCWD, where, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("bind %s: move_mount: %w", t.target, err)
	}
	return nil
}

func pickStage() (string, error) {
	for _, dir := range stageCandidates {
		var st unix.Stat_t
		if unix.Stat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return dir, nil
		}
	}
	return "", errors.New("no directory to mount the new root on")
}
