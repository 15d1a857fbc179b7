package dirtar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
)

// lostFound is ext4's own directory at a volume's root: not the user's, never copied.
const lostFound = "lost+found"

// Write writes the files under dir (symbolic links as links, never followed; ext4's
// lost+found left out) as a PAX tar, and returns the bytes of file contents.
func Write(dir string, w io.Writer) (int64, error) {
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

// Extract replaces the files under dir (but lost+found) with those of the tar at path,
// keeping their modes, owners and modification times. Every path goes through an os.Root, so an
// entry cannot lead outside dir.
func Extract(dir, path string) error {
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
