package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The files API on a volume without a session: the daemon mounts it on the host for the call (or
// uses the mount a session's lease holds) and reaches its files through an os.Root, so no path or
// symbolic link written inside a sandbox leads out of the volume.

// cleanRel turns an API path into one relative to the volume's root: "/a/b" and "a/b" are the
// same file; ".." that leaves the volume is refused.
func cleanRel(p string) (string, error) {
	c := path.Clean("/" + p)
	if p == "" || c == "/" {
		return "", sandbox.Errorf(sandbox.KindInvalidRequest, "a file path is required").WithHint("name a file inside the volume, such as data.csv")
	}
	if strings.Contains(p, "\x00") {
		return "", sandbox.Errorf(sandbox.KindInvalidRequest, "the path has a NUL byte")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", sandbox.Errorf(sandbox.KindInvalidRequest, "path %q leaves the volume", p).WithHint("use a path inside the volume, without ..")
		}
	}
	return strings.TrimPrefix(c, "/"), nil
}

// with runs f on the volume's mounted root: through the lease a session holds when there is one
// and the access fits it, else through a lease of its own for the call.
func (s *Store) with(tenant, name string, write bool, f func(root *os.Root) error) error {
	var leaseErr error // a cluster's volume: the write's content was not recorded
	s.mu.Lock()
	var release func()
	mnt := ""
	if l := s.leases[key{tenant, name}]; l != nil && l.stuck == nil && !write {
		if _, err := s.read(tenant, name); err != nil {
			s.mu.Unlock()
			return err
		}
		mnt = s.volDir(tenant, name) + "/mnt"
	} else if c := s.opts.Cluster; c != nil {
		// A cluster's volume: a write takes the read-write lease for the call and stores the
		// files as the volume's new content; a read mounts this node's copy of the latest.
		var err error
		if write {
			mnt, release, err = s.attachCluster("", tenant, name, false)
			if err == nil {
				l := s.leases[key{tenant, name}]
				done := release
				release = func() {
					done()
					if l.err != nil {
						leaseErr = l.err
					}
				}
			}
		} else {
			var r record
			if _, r, err = c.get(tenant, name); err == nil {
				if err = s.syncLocal(r); err != nil {
					err = sandbox.Errorf(sandbox.KindRuntimeUnavailable, "%v", err)
				}
			}
			if err == nil {
				mnt, release, err = s.attachLocked(tenant, name, true)
			}
		}
		if err != nil {
			s.mu.Unlock()
			if sandbox.KindOf(err) == sandbox.KindConflict && write {
				return sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted by a session; the files API writes only to a volume no session holds", name).
					WithHint("write from inside the session, or close it first")
			}
			return err
		}
	} else {
		var err error
		if mnt, release, err = s.attachLocked(tenant, name, !write); err != nil {
			s.mu.Unlock()
			if sandbox.KindOf(err) == sandbox.KindConflict && write {
				return sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted by a session; the files API writes only to a volume no session holds", name).
					WithHint("write from inside the session, or close it first")
			}
			return err
		}
	}
	s.mu.Unlock()
	root, err := os.OpenRoot(mnt)
	if err == nil {
		err = f(root)
		root.Close()
	} else {
		err = fmt.Errorf("volume %q: %w", name, err)
	}
	if release != nil {
		release()
	}
	if err == nil {
		err = leaseErr
	}
	return err
}

// ReadFile reads a file of tenant's volume name.
func (s *Store) ReadFile(tenant, name, p string) ([]byte, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return nil, err
	}
	var b []byte
	err = s.with(tenant, name, false, func(root *os.Root) error {
		b, err = root.ReadFile(rel)
		return err
	})
	switch {
	case escapes(err):
		return nil, errEscapes(name, rel)
	case errors.Is(err, fs.ErrNotExist):
		return nil, sandbox.Errorf(sandbox.KindNotFound, "volume %q has no file %q", name, rel)
	case errors.Is(err, syscall.EISDIR):
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "%q in volume %q is a directory", rel, name)
	}
	return b, err
}

// WriteFile writes a file of tenant's volume name, making its directories, owned by the
// sandbox's user. A write past the quota fails with an output_limit error and leaves the file as
// it was: the content goes to a temporary file first, renamed over the file only when whole.
func (s *Store) WriteFile(tenant, name, p string, content []byte) error {
	rel, err := cleanRel(p)
	if err != nil {
		return err
	}
	var quota int64
	if m, err := s.read(tenant, name); err == nil {
		quota = m.QuotaBytes
	}
	err = s.with(tenant, name, true, func(root *os.Root) error {
		if dir := path.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for d := dir; d != "."; d = path.Dir(d) {
				_ = root.Lchown(d, s.opts.UID, s.opts.GID)
			}
		}
		tmp := path.Join(path.Dir(rel), ".agentbox-upload-"+path.Base(rel))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(content)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = root.Remove(tmp)
			return err
		}
		_ = root.Lchown(tmp, s.opts.UID, s.opts.GID)
		return root.Rename(tmp, rel)
	})
	if escapes(err) {
		return errEscapes(name, rel)
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return sandbox.Errorf(sandbox.KindOutputLimit, "volume %q is full: writing %d bytes to %q would go over its quota of %d bytes; the file was not changed", name, len(content), rel, quota).
			WithHint("remove files from the volume, or make a larger volume and copy into it")
	}
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "%q in volume %q: %v", rel, name, err)
	}
	return err
}

// escapes reports os.Root's refusal of a path that leads out of the volume (a symbolic link made
// inside a sandbox); the standard library does not export that error.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

func errEscapes(name, rel string) error {
	return sandbox.Errorf(sandbox.KindInvalidRequest, "%q in volume %q leads out of the volume (a symbolic link)", rel, name).
		WithHint("the files API follows links only inside the volume; read the file from a session, or remove the link")
}
