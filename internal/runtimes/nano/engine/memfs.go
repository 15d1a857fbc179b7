package engine

import (
	"io/fs"
	"strings"
	"sync"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// memFS is an instance's private file system: everything lives in Go memory, nothing of the host
// is reachable through it. It is mounted at "/" in the guest. The standard library (when the
// build keeps it outside the module) is linked in as a read-only subtree shared by every instance
// of an engine; read-only nodes are never mutated, so sharing them needs no lock.
//
// Writable content is charged against a byte limit (file sizes plus a small cost per inode, so a
// run cannot exhaust the worker's memory with empty files); a write past it fails with ENOSPC.
// Every change records a generation number, so the host can list what a run created or changed.
//
// Symbolic links are not supported (symlink fails with EPERM).
type memFS struct {
	experimentalsys.UnimplementedFS

	mu      sync.Mutex
	root    *node
	used    int64 // bytes charged
	limit   int64 // charge cap; <= 0 means no cap
	nextIno uint64
	gen     uint64
	open    map[*memFile]struct{} // files open: every descriptor the guest holds on this file system
	now     func() int64          // nanoseconds since the epoch, as the guest's wall clock reads it
	// onNoSpace is told about a failure for lack of space, so the WASI layer can report ENOSPC
	// (wazero's errno set has no ENOSPC; it would become EIO).
	onNoSpace func()
}

type nodeKind uint8

const (
	kindDir nodeKind = iota
	kindFile
	kindDev
)

// inodeCost is what every writable inode is charged besides its content: directory entries and
// Go structures cost memory too.
const inodeCost = 256

// devID is the Stat_t.Dev of every node of a memFS.
const devID = 0x61620001

type node struct {
	kind     nodeKind
	perm     fs.FileMode
	ino      uint64
	data     []byte           // kindFile
	children map[string]*node // kindDir
	ro       bool             // part of a read-only mount: never mutated
	pinned   bool             // holds a mount or the control device: cannot be moved or removed
	nlink    uint64
	opens    int
	atim     int64
	mtim     int64
	ctim     int64
	gen      uint64       // generation of the last change of content or name
	sink     func([]byte) // kindDev: receives writes
}

func (n *node) mode() fs.FileMode {
	switch n.kind {
	case kindDir:
		return fs.ModeDir | n.perm
	case kindDev:
		return fs.ModeDevice | fs.ModeCharDevice | n.perm
	}
	return n.perm
}

func (n *node) stat() wsys.Stat_t {
	size := int64(len(n.data))
	if n.kind == kindDir {
		size = int64(len(n.children))
	}
	return wsys.Stat_t{Dev: devID, Ino: n.ino, Mode: n.mode(), Nlink: n.nlink, Size: size,
		Atim: n.atim, Mtim: n.mtim, Ctim: n.ctim}
}

func newMemFS(now func() int64, onNoSpace func()) *memFS {
	if onNoSpace == nil {
		onNoSpace = func() {}
	}
	m := &memFS{now: now, onNoSpace: onNoSpace, open: map[*memFile]struct{}{}}
	m.root = &node{}
	m.clear()
	return m
}

// clear empties the file system as newMemFS left it. The root node keeps its identity (wazero's
// pre-opened directory may hold it open); nothing else of the old tree stays reachable from it.
// Call it only when no file but the root (or a read-only one) is open.
func (m *memFS) clear() {
	t := m.now()
	*m.root = node{kind: kindDir, perm: 0o755, ino: 1, children: map[string]*node{}, nlink: 2,
		pinned: true, atim: t, mtim: t, ctim: t}
	m.used, m.limit, m.nextIno, m.gen = 0, 0, 2, 0
}

// openFiles returns the files open now.
func (m *memFS) openFiles() []*memFile {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*memFile, 0, len(m.open))
	for f := range m.open {
		out = append(out, f)
	}
	return out
}

// sameOpenFiles reports whether exactly the files of want are open, and rewinds them (open
// directories forget their listing).
func (m *memFS) sameOpenFiles(want []*memFile) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.open) != len(want) {
		return false
	}
	for _, f := range want {
		if _, ok := m.open[f]; !ok {
			return false
		}
	}
	for _, f := range want {
		f.off, f.names, f.pos = 0, nil, 0
	}
	return true
}

// setLimit sets the byte cap for what follows; what is already stored stays.
func (m *memFS) setLimit(limit int64) {
	m.mu.Lock()
	m.limit = limit
	m.mu.Unlock()
}

func (m *memFS) usage() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// generation returns the current generation: changes after this call have a larger one.
func (m *memFS) generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

func (m *memFS) bump(n *node) {
	m.gen++
	n.gen = m.gen
	t := m.now()
	n.mtim, n.ctim = t, t
}

// charge reserves delta bytes (negative releases). It reports false, and charges nothing, when
// the cap would be passed.
func (m *memFS) charge(delta int64) bool {
	if delta > 0 && m.limit > 0 && m.used+delta > m.limit {
		m.onNoSpace()
		return false
	}
	m.used += delta
	return true
}

// room is how many more bytes may be charged.
func (m *memFS) room() int64 {
	if m.limit <= 0 {
		return 1 << 62
	}
	return max(m.limit-m.used, 0)
}

// release frees a node that has no name and no open handle left.
func (m *memFS) maybeRelease(n *node) {
	if n.ro || n.nlink > 0 || n.opens > 0 {
		return
	}
	m.charge(-int64(len(n.data)) - inodeCost)
	n.data = nil
}

func (m *memFS) newNode(kind nodeKind, perm fs.FileMode) (*node, experimentalsys.Errno) {
	if !m.charge(inodeCost) {
		return nil, experimentalsys.EIO
	}
	t := m.now()
	n := &node{kind: kind, perm: perm & fs.ModePerm, ino: m.nextIno, atim: t, mtim: t, ctim: t}
	m.nextIno++
	if kind == kindDir {
		n.children = map[string]*node{}
	}
	m.gen++
	n.gen = m.gen
	return n, 0
}

// split turns a path as wazero passes it ("a/b", ".", "a/b/" — already cleaned, relative to the
// root) into its components and whether it had a trailing slash.
func split(p string) ([]string, bool) {
	slash := strings.HasSuffix(p, "/")
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		return nil, slash
	}
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, s := range parts {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out, slash
}

// walk resolves components from the root. ".." is resolved lexically by wazero before we see a
// path; a stray one here is refused.
func (m *memFS) walk(parts []string) (*node, experimentalsys.Errno) {
	n := m.root
	for _, s := range parts {
		if s == ".." {
			return nil, experimentalsys.EPERM
		}
		if n.kind != kindDir {
			return nil, experimentalsys.ENOTDIR
		}
		c, ok := n.children[s]
		if !ok {
			return nil, experimentalsys.ENOENT
		}
		n = c
	}
	return n, 0
}

func (m *memFS) lookup(p string) (*node, experimentalsys.Errno) {
	parts, slash := split(p)
	n, errno := m.walk(parts)
	if errno != 0 {
		return nil, errno
	}
	if slash && n.kind != kindDir {
		return nil, experimentalsys.ENOTDIR
	}
	return n, 0
}

// parentOf resolves the directory holding the last component of p, and that component.
func (m *memFS) parentOf(p string) (*node, string, experimentalsys.Errno) {
	parts, _ := split(p)
	if len(parts) == 0 {
		return nil, "", experimentalsys.EINVAL // the root itself
	}
	dir, errno := m.walk(parts[:len(parts)-1])
	if errno != 0 {
		return nil, "", errno
	}
	if dir.kind != kindDir {
		return nil, "", experimentalsys.ENOTDIR
	}
	name := parts[len(parts)-1]
	if name == ".." {
		return nil, "", experimentalsys.EPERM
	}
	return dir, name, 0
}

// OpenFile implements experimentalsys.FS.
func (m *memFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	m.mu.Lock()
	defer m.mu.Unlock()
	write := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0
	read := flag&experimentalsys.O_WRONLY == 0
	n, errno := m.lookup(p)
	switch {
	case errno == experimentalsys.ENOENT && flag&experimentalsys.O_CREAT != 0:
		parts, slash := split(p)
		if slash || len(parts) == 0 {
			return nil, experimentalsys.EISDIR
		}
		dir, name, errno := m.parentOf(p)
		if errno != 0 {
			return nil, errno
		}
		if dir.ro {
			return nil, experimentalsys.EROFS
		}
		if n, errno = m.newNode(kindFile, perm); errno != 0 {
			return nil, errno
		}
		n.nlink = 1
		dir.children[name] = n
		m.bump(dir)
	case errno != 0:
		return nil, errno
	case flag&experimentalsys.O_CREAT != 0 && flag&experimentalsys.O_EXCL != 0:
		return nil, experimentalsys.EEXIST
	}
	if n.kind == kindDir {
		if write {
			return nil, experimentalsys.EISDIR
		}
	} else if flag&experimentalsys.O_DIRECTORY != 0 {
		return nil, experimentalsys.ENOTDIR
	}
	if n.kind == kindDev && read {
		return nil, experimentalsys.EACCES // the control device is write-only
	}
	if n.ro && (write || flag&experimentalsys.O_TRUNC != 0) {
		return nil, experimentalsys.EROFS
	}
	if n.kind == kindFile && write && flag&experimentalsys.O_TRUNC != 0 {
		m.charge(-int64(len(n.data)))
		n.data = n.data[:0]
		m.bump(n)
	}
	if !n.ro {
		n.opens++
	}
	f := &memFile{fs: m, n: n, read: read, write: write, append: flag&experimentalsys.O_APPEND != 0}
	m.open[f] = struct{}{}
	f.seeker.f = f
	return f, 0
}

// Lstat implements experimentalsys.FS; there are no symbolic links, so it is Stat.
func (m *memFS) Lstat(p string) (wsys.Stat_t, experimentalsys.Errno) { return m.Stat(p) }

// Stat implements experimentalsys.FS.
func (m *memFS) Stat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, errno := m.lookup(p)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return n.stat(), 0
}

// Mkdir implements experimentalsys.FS.
func (m *memFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, errno := m.mkdir(p, perm)
	return errno
}

func (m *memFS) mkdir(p string, perm fs.FileMode) (*node, experimentalsys.Errno) {
	dir, name, errno := m.parentOf(p)
	if errno != 0 {
		if errno == experimentalsys.EINVAL { // the root
			return nil, experimentalsys.EEXIST
		}
		return nil, errno
	}
	if _, ok := dir.children[name]; ok {
		return nil, experimentalsys.EEXIST
	}
	if dir.ro {
		return nil, experimentalsys.EROFS
	}
	n, errno := m.newNode(kindDir, perm)
	if errno != 0 {
		return nil, errno
	}
	n.nlink = 2
	dir.children[name] = n
	dir.nlink++
	m.bump(dir)
	return n, 0
}

// Chmod implements experimentalsys.FS.
func (m *memFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, errno := m.lookup(p)
	if errno != 0 {
		return errno
	}
	if n.ro {
		return experimentalsys.EROFS
	}
	n.perm = perm & fs.ModePerm
	n.ctim = m.now()
	return 0
}

// Rename implements experimentalsys.FS.
func (m *memFS) Rename(from, to string) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	fdir, fname, errno := m.parentOf(from)
	if errno != 0 {
		return errno
	}
	n, ok := fdir.children[fname]
	if !ok {
		return experimentalsys.ENOENT
	}
	tdir, tname, errno := m.parentOf(to)
	if errno != 0 {
		return errno
	}
	if n.ro || fdir.ro || tdir.ro {
		return experimentalsys.EROFS
	}
	if n.pinned {
		return experimentalsys.EPERM
	}
	if n.kind == kindDir {
		// A directory cannot move inside itself.
		fp, _ := split(from)
		tp, _ := split(to)
		if len(tp) > len(fp) && strings.Join(tp[:len(fp)], "/") == strings.Join(fp, "/") {
			return experimentalsys.EINVAL
		}
	}
	if old, ok := tdir.children[tname]; ok {
		if old == n {
			return 0
		}
		if old.ro || old.pinned {
			return experimentalsys.EPERM
		}
		switch {
		case n.kind == kindDir && old.kind != kindDir:
			return experimentalsys.ENOTDIR
		case n.kind != kindDir && old.kind == kindDir:
			return experimentalsys.EISDIR
		case old.kind == kindDir && len(old.children) > 0:
			return experimentalsys.ENOTEMPTY
		}
		m.unlinkNode(tdir, tname, old)
	}
	delete(fdir.children, fname)
	tdir.children[tname] = n
	if n.kind == kindDir && fdir != tdir {
		fdir.nlink--
		tdir.nlink++
	}
	m.bump(fdir)
	m.bump(tdir)
	m.touchTree(n)
	return 0
}

// touchTree marks a moved node and everything under it as changed: their paths are new.
func (m *memFS) touchTree(n *node) {
	m.gen++
	n.gen = m.gen
	n.ctim = m.now()
	for _, c := range n.children {
		m.touchTree(c)
	}
}

func (m *memFS) unlinkNode(dir *node, name string, n *node) {
	delete(dir.children, name)
	if n.kind == kindDir {
		dir.nlink--
		n.nlink = 0
	} else {
		n.nlink--
	}
	m.bump(dir)
	m.maybeRelease(n)
}

// Rmdir implements experimentalsys.FS.
func (m *memFS) Rmdir(p string) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, name, errno := m.parentOf(p)
	if errno != 0 {
		if errno == experimentalsys.EINVAL {
			return experimentalsys.EPERM
		}
		return errno
	}
	n, ok := dir.children[name]
	switch {
	case !ok:
		return experimentalsys.ENOENT
	case n.kind != kindDir:
		return experimentalsys.ENOTDIR
	case n.ro || dir.ro:
		return experimentalsys.EROFS
	case n.pinned:
		return experimentalsys.EPERM
	case len(n.children) > 0:
		return experimentalsys.ENOTEMPTY
	}
	m.unlinkNode(dir, name, n)
	return 0
}

// Unlink implements experimentalsys.FS.
func (m *memFS) Unlink(p string) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, name, errno := m.parentOf(p)
	if errno != 0 {
		return errno
	}
	n, ok := dir.children[name]
	switch {
	case !ok:
		return experimentalsys.ENOENT
	case n.kind == kindDir:
		return experimentalsys.EISDIR
	case n.ro || dir.ro:
		return experimentalsys.EROFS
	case n.pinned:
		return experimentalsys.EPERM
	}
	m.unlinkNode(dir, name, n)
	return 0
}

// Link implements experimentalsys.FS: hard links are not supported.
func (m *memFS) Link(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Symlink implements experimentalsys.FS: not supported.
func (m *memFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Readlink implements experimentalsys.FS: no node is a link.
func (m *memFS) Readlink(p string) (string, experimentalsys.Errno) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, errno := m.lookup(p); errno != 0 {
		return "", errno
	}
	return "", experimentalsys.EINVAL
}

// Utimens implements experimentalsys.FS.
func (m *memFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, errno := m.lookup(p)
	if errno != 0 {
		return errno
	}
	return m.utimens(n, atim, mtim)
}

func (m *memFS) utimens(n *node, atim, mtim int64) experimentalsys.Errno {
	if n.ro {
		return experimentalsys.EROFS
	}
	if atim != experimentalsys.UTIME_OMIT {
		n.atim = atim
	}
	if mtim != experimentalsys.UTIME_OMIT {
		n.mtim = mtim
	}
	n.ctim = m.now()
	return 0
}
