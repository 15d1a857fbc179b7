//go:build linux

package guest

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The daemon's file operations (OpWriteFile, OpReadFile, OpListFiles, OpDeleteFile, and a run's
// input files) act for the session's code, which by then may have planted symbolic links
// anywhere it can write. So each operation:
//
//   - runs as the sandbox's user: on an OS thread of its own whose effective uid and gid are the
//     Python process's, with no supplementary groups (asUser). The agent's other threads stay
//     root meanwhile. What the code could not read or change, the API cannot either, and what the
//     API writes belongs to the code.
//   - stays under one of the session's directories (Config.Roots: the work directory and /tmp).
//     Any other path is invalid_request.
//   - resolves the path from the root's descriptor with openat2(RESOLVE_BENEATH |
//     RESOLVE_NO_MAGICLINKS), which gVisor implements: a symbolic link that leads out of the
//     root (any absolute link, or a relative one that climbs above it) fails the operation with
//     invalid_request, at whatever component it is met. A relative link that stays inside is
//     followed.
//   - never follows a link at the name it changes: a write replaces a link at its path with the
//     file (rename over it), remove removes the link itself, and a listing reports a link as a
//     link (FileInfo.Link) without descending into it.
//
// Escaping links are invalid_request, not not_found: the session's own code made the link, so
// there is no other tenant's existence to hide, and "not found" would send the caller looking for
// a file that is there; the request names something the files API does not serve, like a path
// outside the roots.

// DefaultRoots are the directories the files API serves besides the work directory: /tmp, where
// the conformance suite and the code's own temporary files put absolute paths. The work
// directory is always a root.
var DefaultRoots = []string{"/tmp"}

// roots returns the session's directories, the work directory first.
func (a *agent) roots() []string {
	rs := a.cfg.Roots
	if rs == nil {
		rs = DefaultRoots
	}
	return append([]string{a.cfg.WorkDir}, rs...)
}

// located is a path under one of the roots.
type located struct {
	path string // the clean absolute path asked for
	root string // the root it is under
	rel  string // the rest, relative to root; "." for the root itself
}

// locate checks a path from the daemon and finds the root it is under (the longest that holds it).
func (a *agent) locate(p string) (located, error) {
	p, err := cleanAbs(p)
	if err != nil {
		return located{}, err
	}
	var best string
	for _, r := range a.roots() {
		if within(p, r) && len(r) > len(best) {
			best = r
		}
	}
	if best == "" {
		return located{}, &proto.Error{Kind: sandbox.KindInvalidRequest,
			Message: fmt.Sprintf("%s is outside the session's directories (%s)", p, strings.Join(a.roots(), ", "))}
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, best), "/")
	if rel == "" {
		rel = "."
	}
	return located{path: p, root: best, rel: rel}, nil
}

// within reports whether p is dir or under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir) && len(p) > len(dir) && p[len(dir)] == '/'
}

// asUser runs fn on an OS thread of its own whose effective credentials are the sandbox user's,
// and gives the thread back as it was. fn must not start goroutines (they would run on root
// threads).
//
// The thread is not thrown away (a goroutine that ends locked ends its thread): it may be the
// thread that started Python, whose parent-death signal (Pdeathsig) follows that thread, not the
// process. So only the effective ids change; real and saved stay root, which lets the thread
// change back (and capabilities(7) puts its capabilities back when its euid is 0 again). A thread
// that cannot change back is left locked and ends with its goroutine.
func (a *agent) asUser(fn func() error) error { return a.onUserThread(false, fn) }

// asUserWholly is asUser with the thread's real uid and gid the user's too (the saved ones stay
// root's, to come back): what checks the real ids, as gVisor's right to read another process's
// /proc files does, then sees the user.
func (a *agent) asUserWholly(fn func() error) error { return a.onUserThread(true, fn) }

// asUserHere is asUser on the calling goroutine's own thread, locked to it meanwhile: no other
// thread is woken, where asUser's goroutine wakes one or two (under load each wake-up waits for a
// CPU: 0.2-2.5 ms measured at a step's snapshot beside its fork). For what runs on the agent's
// serial goroutine at every run and step (a run's changed files, a step's files). A thread that
// cannot become root again stays locked to the goroutine as the user: what runs on it later
// fails for want of root's rights, it never gains any.
func (a *agent) asUserHere(fn func() error) error {
	runtime.LockOSThread()
	restore, err := becomeUser(a.cfg.UID, a.cfg.GID, false)
	if err != nil {
		if !errors.Is(err, errNotRestored) {
			runtime.UnlockOSThread() // as it was: becomeUser changed nothing, or changed it all back
		}
		return &proto.Error{Kind: sandbox.KindInternal, Message: "becoming the sandbox user: " + err.Error()}
	}
	err = fn()
	if rerr := restore(); rerr != nil {
		log.Printf("the agent's serial thread cannot become root again (%v); it stays the user's", rerr)
		return err
	}
	runtime.UnlockOSThread()
	return err
}

// onUserThread is asUser, or asUserWholly when real is set.
func (a *agent) onUserThread(real bool, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restore, err := becomeUser(a.cfg.UID, a.cfg.GID, real)
		if err != nil {
			done <- &proto.Error{Kind: sandbox.KindInternal, Message: "becoming the sandbox user: " + err.Error()}
			return
		}
		err = fn()
		if rerr := restore(); rerr != nil {
			log.Printf("a file operation's thread cannot become root again (%v); it ends", rerr)
		} else {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// keep is -1 as a uid_t or gid_t argument: "leave this id as it is".
const keep = uintptr(math.MaxUint32)

// becomeUser sets the calling thread's effective uid and gid to the user's (and its real ones
// too when real is set), and its supplementary groups to none, and returns how to change it back. These are the raw system calls, which on
// Linux (and in gVisor) change one thread: the syscall package's wrappers would change every thread
// of the agent. An agent that is not root (tests run it unprivileged only when it needs no other
// user) keeps its own credentials.
func becomeUser(uid, gid int, real bool) (restore func() error, err error) {
	c, err := agentCreds()
	if err != nil {
		return nil, err
	}
	if c.euid != 0 {
		if c.euid != uid {
			return nil, fmt.Errorf("the agent runs as uid %d, not root: it cannot act as uid %d", c.euid, uid)
		}
		return func() error { return nil }, nil
	}
	// The thread's real ids, to set back: the agent's.
	groups, egid, ruid, rgid := c.groups, c.egid, c.ruid, c.rgid
	// The real ids change with the effective ones, or stay (keep).
	realID := func(id uintptr) uintptr {
		if real {
			return id
		}
		return keep
	}
	restore = func() error {
		// The uid first: being root again gives back the capabilities the others need. The real
		// ids are set back too, whatever fn did with them (realAsUser).
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(ruid), 0, keep); e != 0 {
			return fmt.Errorf("setresuid back to 0: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(rgid), uintptr(egid), keep); e != 0 {
			return fmt.Errorf("setresgid back to %d: %w", egid, e)
		}
		return setGroups(groups)
	}
	// A failure part way is undone; an undo that fails too is errNotRestored.
	undo := func(err error) error {
		if rerr := restore(); rerr != nil {
			return errors.Join(err, fmt.Errorf("%w: %w", errNotRestored, rerr))
		}
		return err
	}
	if err := setGroups(nil); err != nil {
		return nil, undo(err)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, realID(uintptr(gid)), uintptr(gid), keep); e != 0 {
		return nil, undo(fmt.Errorf("setresgid %d: %w", gid, e))
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, realID(uintptr(uid)), uintptr(uid), keep); e != 0 {
		return nil, undo(fmt.Errorf("setresuid %d: %w", uid, e))
	}
	if r, _, _ := unix.RawSyscall(unix.SYS_GETEUID, 0, 0, 0); int(r) != uid {
		return nil, undo(fmt.Errorf("still uid %d after setresuid %d", r, uid))
	}
	return restore, nil
}

// errNotRestored is in becomeUser's error when it failed part way and could not set the thread's
// credentials back either: that thread must never serve other work (it is left locked, and ends
// with its goroutine or stays with it).
var errNotRestored = errors.New("the thread's credentials could not be set back")

// realAsUser makes the real uid and gid of the calling thread, a thread of asUser (its effective
// ids the user's, its saved ones root's), the user's as well, for what checks the real ids (gVisor's
// right to read another process's /proc files), and returns how to put them back (the saved
// ones). Both changes are allowed without privilege: the new real id is the effective one, and
// the old one the saved one. An agent that is not root keeps its own ids. onUserThread's restore
// sets the real ids back too, should this one's fail.
func realAsUser(uid, gid int) (restore func() error, err error) {
	var ruid, euid, suid uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&ruid)), uintptr(unsafe.Pointer(&euid)), uintptr(unsafe.Pointer(&suid))); e != 0 {
		return nil, fmt.Errorf("getresuid: %w", e)
	}
	var rgid, egid, sgid uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETRESGID, uintptr(unsafe.Pointer(&rgid)), uintptr(unsafe.Pointer(&egid)), uintptr(unsafe.Pointer(&sgid))); e != 0 {
		return nil, fmt.Errorf("getresgid: %w", e)
	}
	if int(ruid) == uid && int(rgid) == gid {
		return func() error { return nil }, nil
	}
	if int(euid) != uid || int(egid) != gid {
		return nil, fmt.Errorf("the thread acts as uid %d gid %d, not the user's %d %d", euid, egid, uid, gid)
	}
	restore = func() error {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(ruid), keep, keep); e != 0 {
			return fmt.Errorf("setresuid back to real %d: %w", ruid, e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(rgid), keep, keep); e != 0 {
			return fmt.Errorf("setresgid back to real %d: %w", rgid, e)
		}
		return nil
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), keep, keep); e != 0 {
		return nil, fmt.Errorf("setresgid real %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), keep, keep); e != 0 {
		return nil, errors.Join(fmt.Errorf("setresuid real %d: %w", uid, e), restore())
	}
	return restore, nil
}

// agentCreds are the agent's own credentials (effective uid and gid, real uid and gid,
// supplementary groups), read once, on a thread with the agent's credentials (becomeUser's
// threads go back to them or end): they never change, and each read is a system call, which under
// gVisor costs the sandbox ~20 µs of CPU on every run's walk of the work directory (rawio.go).
var agentCreds = sync.OnceValues(func() (creds, error) {
	groups, err := unix.Getgroups()
	if err != nil {
		return creds{}, fmt.Errorf("getgroups: %w", err)
	}
	c := creds{euid: os.Geteuid(), egid: os.Getegid(), groups: groups}
	var ignored uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&c.ruid)), uintptr(unsafe.Pointer(&ignored)), uintptr(unsafe.Pointer(&ignored))); e != 0 {
		return creds{}, fmt.Errorf("getresuid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_GETRESGID, uintptr(unsafe.Pointer(&c.rgid)), uintptr(unsafe.Pointer(&ignored)), uintptr(unsafe.Pointer(&ignored))); e != 0 {
		return creds{}, fmt.Errorf("getresgid: %w", e)
	}
	return c, nil
})

// creds are a thread's credentials.
type creds struct {
	euid, egid int
	ruid, rgid uint32
	groups     []int
}

// setGroups sets the calling thread's supplementary groups.
func setGroups(groups []int) error {
	gids := make([]uint32, len(groups)+1) // never empty, for the pointer
	for i, g := range groups {
		gids[i] = uint32(g)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&gids[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	return nil
}

// resolveFlags keep every resolution under its root.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// openRoot opens a root directory itself, not following a link there.
func openRoot(root string) (int, error) {
	return unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// openBeneath opens rel under the directory dirfd, every component resolved beneath it.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
	for range 8 {
		fd, err := unix.Openat2(dirfd, rel, how)
		if err != unix.EAGAIN && err != unix.EINTR { // EAGAIN: a rename raced with a ".." step
			return fd, err
		}
	}
	return unix.Openat2(dirfd, rel, how)
}

// inRoot runs fn as the sandbox user with the descriptor of l's root.
func (a *agent) inRoot(l located, fn func(root int) error) error {
	return a.asUser(func() error {
		root, err := openRoot(l.root)
		if err != nil {
			return fmt.Errorf("open %s: %w", l.root, err)
		}
		defer unix.Close(root)
		return fn(root)
	})
}

// tmpSuffix marks a file being written; listings leave such files out.
const tmpSuffix = ".agentbox-tmp"

// writeFile writes content to path, creating parents: new files and directories belong to the
// sandbox user, so the code can change what it was given. The file is written beside its name and
// renamed over it, so a reader never sees half of it, and a link at the name is replaced, not
// followed.
func (a *agent) writeFile(p string, content []byte, mode uint32) error {
	l, err := a.locate(p)
	if err != nil {
		return err
	}
	if l.rel == "." {
		return &proto.Error{Kind: sandbox.KindConflict, Message: l.path + " is a directory"}
	}
	perm := uint32(0o644)
	if mode != 0 {
		perm = mode & 0o777
	}
	err = a.inRoot(l, func(root int) error {
		dir, err := mkdirAllBeneath(root, path.Dir(l.rel), l.root)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		name := path.Base(l.rel)
		tmp := name + tmpSuffix
		_ = unix.Unlinkat(dir, tmp, 0) // a leftover of an interrupted write, or whatever the code put there
		fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), l.path)
		_, werr := f.Write(content)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = unix.Renameat(dir, tmp, dir, name)
		}
		if werr != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
		return werr
	})
	return fileErr(l, err)
}

// mkdirAllBeneath opens the directory rel under root, making what is missing of it, and returns
// its descriptor.
func mkdirAllBeneath(root int, rel, rootPath string) (int, error) {
	fd, err := openBeneath(root, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != unix.ENOENT || rel == "." {
		return fd, err
	}
	parts := strings.Split(rel, "/")
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		next, err := openBeneath(root, prefix, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == unix.ENOENT {
			// Made in the parent just resolved: mkdirat never follows a link at the name (a
			// dangling one makes it fail with EEXIST, and the open below then fails as it should).
			if err := unix.Mkdirat(cur, parts[i], 0o755); err != nil && err != unix.EEXIST {
				unix.Close(cur)
				return -1, err
			}
			next, err = openBeneath(root, prefix, unix.O_PATH|unix.O_DIRECTORY, 0)
		}
		unix.Close(cur)
		if err != nil {
			if err == unix.ENOTDIR {
				return -1, &proto.Error{Kind: sandbox.KindConflict, Message: path.Join(rootPath, prefix) + " is not a directory"}
			}
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// maxReadFile bounds one file read through the protocol.
const maxReadFile = 512 << 20

func (a *agent) readFile(p string) ([]byte, error) {
	l, err := a.locate(p)
	if err != nil {
		return nil, err
	}
	var b []byte
	err = a.inRoot(l, func(root int) error {
		// O_NONBLOCK: a FIFO the code left there does not hang the agent (it is refused below).
		fd, err := openBeneath(root, l.rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), l.path)
		defer f.Close()
		b, err = readRegular(f, l.path)
		return err
	})
	return b, fileErr(l, err)
}

// readRegular reads f, which must be a regular file of at most maxReadFile bytes.
func readRegular(f *os.File, name string) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &proto.Error{Kind: sandbox.KindInvalidRequest, Message: name + " is not a regular file"}
	}
	if st.Size() > maxReadFile {
		return nil, &proto.Error{Kind: sandbox.KindOutputLimit, Message: name + " is larger than " + strconv.Itoa(maxReadFile>>20) + " MiB"}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReadFile+1))
	if err == nil && len(b) > maxReadFile {
		return nil, &proto.Error{Kind: sandbox.KindOutputLimit, Message: name + " is larger than " + strconv.Itoa(maxReadFile>>20) + " MiB"}
	}
	return b, err
}

// maxList bounds the entries of one listing.
const maxList = 10000

// listFiles lists everything under path, recursively, as the code would see it with lstat: a
// link is an entry of its own (Link), never followed into. A path that is a file lists nothing.
func (a *agent) listFiles(p string) ([]proto.FileInfo, error) {
	l, err := a.locate(p)
	if err != nil {
		return nil, err
	}
	var out []proto.FileInfo
	err = a.inRoot(l, func(root int) error {
		fd, err := openBeneath(root, l.rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			return err
		}
		out = []proto.FileInfo{}
		walkDir(fd, l.path, &out)
		return nil
	})
	return out, fileErr(l, err)
}

// walkDir appends the entries under the directory fd (whose path is dir) to out, depth first in
// name order, up to maxList entries, and closes fd. It descends only into real directories,
// opened without following links; what the user may not read is left out.
func walkDir(fd int, dir string, out *[]proto.FileInfo) {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	slices.Sort(names)
	for _, name := range names {
		if len(*out) >= maxList {
			return
		}
		if strings.HasSuffix(name, tmpSuffix) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		q := dir + "/" + name
		typ := st.Mode & unix.S_IFMT
		fi := proto.FileInfo{Path: q, Size: st.Size, Dir: typ == unix.S_IFDIR, Link: typ == unix.S_IFLNK,
			ModTime: time.Unix(st.Mtim.Unix()).UTC().Truncate(time.Millisecond)}
		if fi.Dir {
			fi.Size = 0
		}
		*out = append(*out, fi)
		if fi.Dir {
			if sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
				walkDir(sub, q, out)
			}
		}
	}
}

// deleteFile removes path: a file or a link (never what it points to), or a directory with
// everything under it, links in it removed as links. The roots themselves stay.
func (a *agent) deleteFile(p string) error {
	l, err := a.locate(p)
	if err != nil {
		return err
	}
	if l.rel == "." {
		if l.root == a.cfg.WorkDir {
			return &proto.Error{Kind: sandbox.KindInvalidRequest, Message: "the work directory itself cannot be deleted"}
		}
		return &proto.Error{Kind: sandbox.KindInvalidRequest, Message: l.root + " itself cannot be deleted"}
	}
	err = a.inRoot(l, func(root int) error {
		dir, err := openBeneath(root, path.Dir(l.rel), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		return removeAllAt(dir, path.Base(l.rel))
	})
	return fileErr(l, err)
}

// removeAllAt removes name in the directory dirfd, and if it is a directory everything under it,
// opening each directory without following links.
func removeAllAt(dirfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dirfd, name, 0)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, rerr := f.Readdirnames(-1)
	var first error
	for _, n := range names {
		if err := removeAllAt(fd, n); err != nil && err != unix.ENOENT && first == nil {
			first = err
		}
	}
	f.Close()
	if first != nil {
		return first
	}
	if rerr != nil {
		return rerr
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// fileErr gives a file operation's error its kind and a message that names the path asked for.
func fileErr(l located, err error) error {
	if err == nil {
		return nil
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return &proto.Error{Kind: sandbox.KindInternal, Message: l.path + ": " + err.Error()}
	}
	kind, msg := sandbox.KindInternal, err.Error()
	switch errno {
	case unix.ENOENT:
		kind, msg = sandbox.KindNotFound, "no such file or directory"
	case unix.EXDEV, unix.ELOOP:
		kind, msg = sandbox.KindInvalidRequest, "a symbolic link on the way leads out of "+l.root+" (the files API stays in the session's directories and follows only links that stay inside)"
	case unix.EACCES, unix.EPERM:
		kind, msg = sandbox.KindInvalidRequest, "permission denied (the files API acts as the sandbox's user)"
	case unix.ENOTDIR:
		kind, msg = sandbox.KindConflict, "a parent is not a directory"
	case unix.EEXIST, unix.ENOTEMPTY, unix.EISDIR:
		kind, msg = sandbox.KindConflict, "is a directory, or in the way: "+err.Error()
	case unix.ENOSPC, unix.EDQUOT, unix.EFBIG:
		kind, msg = sandbox.KindInvalidRequest, "no space left under the session's files limit"
	case unix.ENAMETOOLONG:
		kind, msg = sandbox.KindInvalidRequest, "the name is too long"
	}
	return &proto.Error{Kind: kind, Message: l.path + ": " + msg}
}
