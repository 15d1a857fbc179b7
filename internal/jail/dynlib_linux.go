package jail

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// loaderDeps is what a dynamically linked binary (one built with cgo) needs
// inside the jail to start: its ELF interpreter and shared libraries.
type loaderDeps struct {
	binds   []Bind // read-only, executable: interpreter and libraries
	libPath string // LD_LIBRARY_PATH for the worker, "" if none
}

// findLoaderDeps reads them off this very process: the init stage is the same
// binary, freshly loaded by the same loader, so the shared objects mapped
// executable here are exactly those the worker will load at start. The
// interpreter is bound at the path its PT_INTERP names (usually a symlink on
// the host), the libraries at their real paths, and LD_LIBRARY_PATH points at
// their directories, since the jail has no /etc/ld.so.cache. A static binary
// needs nothing.
func findLoaderDeps() (loaderDeps, error) {
	var deps loaderDeps
	interp, err := interpreter("/proc/self/exe")
	if err != nil || interp == "" {
		return deps, err
	}
	deps.binds = append(deps.binds, Bind{Source: interp, Target: interp})

	skip := map[fileID]bool{}
	for _, p := range []string{"/proc/self/exe", interp} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return deps, fmt.Errorf("stat %s: %w", p, err)
		}
		skip[fileID{unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino}] = true
	}
	libs, err := mappedObjects()
	if err != nil {
		return deps, err
	}
	var dirs []string
	for _, l := range libs {
		if skip[l.id] {
			continue
		}
		skip[l.id] = true
		deps.binds = append(deps.binds, Bind{Source: l.path, Target: l.path})
		if d := path.Dir(l.path); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	deps.libPath = strings.Join(dirs, ":")
	return deps, nil
}

// interpreter returns the PT_INTERP of the ELF file at p, "" if it has none.
func interpreter(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("read own executable: %w", err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		s := strings.TrimRight(string(b), "\x00")
		if !path.IsAbs(s) {
			return "", fmt.Errorf("PT_INTERP %q is not absolute", s)
		}
		return s, nil
	}
	return "", nil
}

type fileID struct {
	major, minor uint32
	ino          uint64
}

type mapped struct {
	path string
	id   fileID
}

// mappedObjects lists the files this process has mapped executable.
func mappedObjects() ([]mapped, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapped
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) != 6 || len(fields[1]) < 3 || fields[1][2] != 'x' || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		maj, min, ok := strings.Cut(fields[3], ":")
		if !ok {
			continue
		}
		ma, err1 := strconv.ParseUint(maj, 16, 32)
		mi, err2 := strconv.ParseUint(min, 16, 32)
		ino, err3 := strconv.ParseUint(fields[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || ino == 0 {
			continue
		}
		out = append(out, mapped{path: fields[5], id: fileID{uint32(ma), uint32(mi), ino}})
	}
	return out, sc.Err()
}
