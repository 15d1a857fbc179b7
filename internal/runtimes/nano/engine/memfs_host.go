package engine

import (
	"path"
	"sort"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// The host's side of a memFS: what the engine does to it outside the guest's calls (layout,
// input files, mounts, the list of changed files). Paths here are absolute and clean.

// mkdirAll creates abs (an absolute clean path) and its parents, as the host.
func (m *memFS) mkdirAll(abs string) (*node, experimentalsys.Errno) {
	n := m.root
	for _, s := range strings.Split(strings.Trim(abs, "/"), "/") {
		if s == "" {
			continue
		}
		if n.kind != kindDir {
			return nil, experimentalsys.ENOTDIR
		}
		c, ok := n.children[s]
		if !ok {
			if n.ro {
				return nil, experimentalsys.EROFS
			}
			var errno experimentalsys.Errno
			if c, errno = m.newNode(kindDir, 0o755); errno != 0 {
				return nil, errno
			}
			c.nlink = 2
			n.children[s] = c
			n.nlink++
		}
		n = c
	}
	if n.kind != kindDir {
		return nil, experimentalsys.ENOTDIR
	}
	return n, 0
}

// writeFile creates or replaces the file at abs (absolute, clean), creating its parents.
func (m *memFS) writeFile(abs string, data []byte) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, errno := m.putFile(abs, data)
	return errno
}

// putFile is writeFile with m.mu held; it returns the file's node.
func (m *memFS) putFile(abs string, data []byte) (*node, experimentalsys.Errno) {
	dir, errno := m.mkdirAll(path.Dir(abs))
	if errno != 0 {
		return nil, errno
	}
	if dir.ro {
		return nil, experimentalsys.EROFS
	}
	name := path.Base(abs)
	n, ok := dir.children[name]
	if ok {
		if n.kind != kindFile || n.ro || n.pinned {
			return nil, experimentalsys.EISDIR
		}
	} else {
		if n, errno = m.newNode(kindFile, 0o644); errno != 0 {
			return nil, errno
		}
		n.nlink = 1
		dir.children[name] = n
		m.bump(dir)
	}
	if !m.charge(int64(len(data)) - int64(len(n.data))) {
		return nil, experimentalsys.EIO
	}
	n.data = append(n.data[:0:0], data...)
	m.bump(n)
	return n, 0
}

// mount links a read-only node (file or tree) at abs, creating its parents and pinning them so
// the guest cannot move the mount away.
func (m *memFS) mount(abs string, ro *node) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := m.limit
	m.limit = 0
	defer func() { m.limit = limit }()
	dir, errno := m.mkdirAll(path.Dir(abs))
	if errno != 0 {
		return errno
	}
	for n, parts := m.root, strings.Split(strings.Trim(path.Dir(abs), "/"), "/"); ; {
		n.pinned = true
		if len(parts) == 0 || parts[0] == "" {
			break
		}
		n, parts = n.children[parts[0]], parts[1:]
	}
	if _, ok := dir.children[path.Base(abs)]; ok {
		return experimentalsys.EEXIST
	}
	dir.children[path.Base(abs)] = ro
	if ro.kind == kindDir {
		dir.nlink++
	}
	return 0
}

// addDevice creates a write-only device node at abs whose writes go to sink.
func (m *memFS) addDevice(abs string, sink func([]byte)) experimentalsys.Errno {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, errno := m.mkdirAll(path.Dir(abs))
	if errno != 0 {
		return errno
	}
	n, errno := m.newNode(kindDev, 0o200)
	if errno != 0 {
		return errno
	}
	n.nlink, n.sink, n.pinned = 1, sink, true
	dir.pinned = true
	dir.children[path.Base(abs)] = n
	return 0
}

// isReadOnly reports whether abs lies in (or is) a read-only mount, or is a device.
func (m *memFS) isReadOnly(abs string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, s := range strings.Split(strings.Trim(abs, "/"), "/") {
		if s == "" {
			continue
		}
		c, ok := n.children[s]
		if !ok {
			return false
		}
		if c.ro || c.kind == kindDev {
			return true
		}
		n = c
	}
	return false
}

// changedSince lists the regular files whose content or name changed after generation gen, with
// their content, sorted by path. Read-only mounts and devices are never listed.
func (m *memFS) changedSince(gen uint64) []changedFile {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []changedFile
	m.walkWritable(func(p string, n *node) {
		if n.kind == kindFile && n.gen > gen {
			out = append(out, changedFile{path: p, data: append([]byte(nil), n.data...)})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// walkWritable calls fn for every directory and regular file outside the read-only mounts, a
// directory before what it holds, in no particular order. The caller holds m.mu.
func (m *memFS) walkWritable(fn func(p string, n *node)) {
	var visit func(dir *node, prefix string)
	visit = func(dir *node, prefix string) {
		for name, c := range dir.children {
			if c.ro || c.kind == kindDev {
				continue
			}
			p := prefix + "/" + name
			fn(p, c)
			if c.kind == kindDir {
				visit(c, p)
			}
		}
	}
	visit(m.root, "")
}

type changedFile struct {
	path string
	data []byte
}

// roTree builds read-only nodes; inode numbers come from a range of their own.
type roTree struct{ nextIno uint64 }

func (t *roTree) file(data []byte, mtim int64) *node {
	t.nextIno++
	return &node{kind: kindFile, perm: 0o444, ino: t.nextIno, data: data, ro: true, nlink: 1,
		atim: mtim, mtim: mtim, ctim: mtim}
}

func (t *roTree) dir(mtim int64) *node {
	t.nextIno++
	return &node{kind: kindDir, perm: 0o555, ino: t.nextIno, children: map[string]*node{}, ro: true,
		nlink: 2, atim: mtim, mtim: mtim, ctim: mtim}
}
