package engine

import (
	"io"
	"sort"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// memFile is an open file, directory or device of a memFS.
type memFile struct {
	seeker[int64]

	fs     *memFS
	n      *node
	read   bool
	write  bool
	append bool
	off    int64
	closed bool

	// Directories: the names listed since the last rewind, and how many were returned.
	names []string
	pos   int
}

// Interface guards.
var (
	_ experimentalsys.FS   = (*memFS)(nil)
	_ experimentalsys.File = (*memFile)(nil)
)

func (f *memFile) Dev() (uint64, experimentalsys.Errno) { return devID, 0 }

func (f *memFile) Ino() (wsys.Inode, experimentalsys.Errno) { return f.n.ino, 0 }

func (f *memFile) IsDir() (bool, experimentalsys.Errno) { return f.n.kind == kindDir, 0 }

func (f *memFile) IsAppend() bool { return f.append }

func (f *memFile) SetAppend(enable bool) experimentalsys.Errno {
	f.append = enable
	return 0
}

func (f *memFile) Stat() (wsys.Stat_t, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return wsys.Stat_t{}, experimentalsys.EBADF
	}
	return f.n.stat(), 0
}

func (f *memFile) Read(buf []byte) (int, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n, errno := f.pread(buf, f.off)
	f.off += int64(n)
	return n, errno
}

func (f *memFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, experimentalsys.EINVAL
	}
	return f.pread(buf, off)
}

func (f *memFile) pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	switch {
	case f.closed:
		return 0, experimentalsys.EBADF
	case f.n.kind == kindDir:
		return 0, experimentalsys.EISDIR
	case !f.read:
		return 0, experimentalsys.EBADF
	case f.n.kind == kindDev || off >= int64(len(f.n.data)):
		return 0, 0
	}
	return copy(buf, f.n.data[off:]), 0
}

// seeker gives memFile the Seek method of experimentalsys.File. It is generic only so that go
// vet's stdmethods check, which wants every Seek(int64, int) to return error like io.Seeker,
// does not apply: wazero's interface returns an Errno.
type seeker[I ~int64] struct{ f *memFile }

func (s seeker[I]) Seek(offset I, whence int) (I, experimentalsys.Errno) {
	n, errno := s.f.seek(int64(offset), whence)
	return I(n), errno
}

func (f *memFile) seek(offset int64, whence int) (int64, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if f.n.kind == kindDir {
		if offset != 0 || whence != io.SeekStart {
			return 0, experimentalsys.EINVAL
		}
		f.names, f.pos = nil, 0
		return 0, 0
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.off
	case io.SeekEnd:
		base = int64(len(f.n.data))
	default:
		return 0, experimentalsys.EINVAL
	}
	if base+offset < 0 {
		return 0, experimentalsys.EINVAL
	}
	f.off = base + offset
	return f.off, 0
}

func (f *memFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, experimentalsys.EBADF
	}
	if f.n.kind != kindDir {
		return nil, experimentalsys.ENOTDIR
	}
	if f.names == nil {
		f.names = make([]string, 0, len(f.n.children))
		for name := range f.n.children {
			f.names = append(f.names, name)
		}
		sort.Strings(f.names)
	}
	var out []experimentalsys.Dirent
	for f.pos < len(f.names) && (n <= 0 || len(out) < n) {
		name := f.names[f.pos]
		f.pos++
		c, ok := f.n.children[name]
		if !ok { // removed since the listing began
			continue
		}
		out = append(out, experimentalsys.Dirent{Name: name, Ino: c.ino, Type: c.mode().Type()})
	}
	return out, 0
}

func (f *memFile) Write(buf []byte) (int, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	off := f.off
	if f.append {
		off = int64(len(f.n.data))
	}
	n, errno := f.pwrite(buf, off)
	f.off = off + int64(n)
	return n, errno
}

func (f *memFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, experimentalsys.EINVAL
	}
	return f.pwrite(buf, off)
}

// maxFileSize keeps offsets sane; the byte cap of the FS is the real bound.
const maxFileSize = 1 << 40

func (f *memFile) pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	switch {
	case f.closed:
		return 0, experimentalsys.EBADF
	case f.n.kind == kindDir:
		return 0, experimentalsys.EISDIR
	case !f.write:
		return 0, experimentalsys.EBADF
	case f.n.kind == kindDev:
		f.n.sink(buf)
		return len(buf), 0
	case len(buf) == 0:
		return 0, 0
	case off+int64(len(buf)) > maxFileSize:
		return 0, experimentalsys.EINVAL
	}
	d := f.n.data
	end := off + int64(len(buf))
	if grow := end - int64(len(d)); grow > 0 {
		if room := f.fs.room(); grow > room {
			// Write what fits, as a full disk does; the next write fails.
			end = int64(len(d)) + room
			if end <= off {
				f.fs.onNoSpace()
				return 0, experimentalsys.EIO // reported as ENOSPC, see memFS.onNoSpace
			}
		}
		f.fs.charge(end - int64(len(d)))
		if end > int64(cap(d)) {
			nc := end + end/4
			if nc > end+(64<<20) {
				nc = end + 64<<20
			}
			nd := make([]byte, end, nc)
			copy(nd, d)
			d = nd
		} else {
			old := len(d)
			d = d[:end]
			clear(d[old:])
		}
		f.n.data = d
	}
	n := copy(d[off:end], buf)
	f.fs.bump(f.n)
	return n, 0
}

func (f *memFile) Truncate(size int64) experimentalsys.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed:
		return experimentalsys.EBADF
	case f.n.kind == kindDir:
		return experimentalsys.EISDIR
	case !f.write:
		return experimentalsys.EBADF
	case f.n.kind == kindDev:
		return 0
	case size < 0 || size > maxFileSize:
		return experimentalsys.EINVAL
	}
	d := f.n.data
	if !f.fs.charge(size - int64(len(d))) {
		return experimentalsys.EIO
	}
	if size <= int64(cap(d)) {
		old := len(d)
		d = d[:size]
		if int(size) > old {
			clear(d[old:])
		}
	} else {
		nd := make([]byte, size)
		copy(nd, d)
		d = nd
	}
	f.n.data = d
	f.fs.bump(f.n)
	return 0
}

func (f *memFile) Sync() experimentalsys.Errno { return 0 }

func (f *memFile) Datasync() experimentalsys.Errno { return 0 }

func (f *memFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return experimentalsys.EBADF
	}
	return f.fs.utimens(f.n, atim, mtim)
}

func (f *memFile) Close() experimentalsys.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0
	}
	f.closed = true
	delete(f.fs.open, f)
	if !f.n.ro {
		f.n.opens--
		f.fs.maybeRelease(f.n)
	}
	return 0
}
