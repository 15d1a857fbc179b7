package runtimetest

import (
	"context"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// fileSession is a FakeSession with file operations: NewSession hands one out when
// Caps.SessionFiles is set, and a plain *FakeSession otherwise, so that only the first is a
// sandbox.SessionFiles. Its files live in memory and answer as a VM-like tier's guest does:
// parents are created on write, a missing path is not_found, the work directory cannot be
// removed.
type fileSession struct{ *FakeSession }

// fileTree maps clean absolute paths to files and directories.
type fileTree map[string]fileEntry

type fileEntry struct {
	content []byte
	dir     bool
	mod     time.Time
}

// newFileTree returns a tree with the work directory and its parents.
func newFileTree() fileTree {
	t := fileTree{}
	for d := sandbox.WorkDir; d != "/"; d = path.Dir(d) {
		t[d] = fileEntry{dir: true, mod: time.Now().UTC()}
	}
	return t
}

// write writes a file at the clean path p, creating its parents.
func (t fileTree) write(p string, content []byte) error {
	var parents []string
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		e, ok := t[d]
		if ok && !e.dir {
			return sandbox.Errorf(sandbox.KindConflict, "%s is not a directory", d)
		}
		if !ok {
			parents = append(parents, d)
		}
	}
	if e, ok := t[p]; ok && e.dir {
		return sandbox.Errorf(sandbox.KindConflict, "%s is a directory", p)
	}
	now := time.Now().UTC()
	for _, d := range parents {
		t[d] = fileEntry{dir: true, mod: now}
	}
	t[p] = fileEntry{content: slices.Clone(content), mod: now}
	return nil
}

// under returns the paths strictly under the directory dir.
func (t fileTree) under(dir string) []string {
	var out []string
	for p := range t {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

func (s fileSession) WriteFile(_ context.Context, p string, content []byte) error {
	p, err := sandbox.CleanPath(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files.write(p, content)
}

func (s fileSession) ReadFile(_ context.Context, p string) ([]byte, error) {
	p, err := sandbox.CleanPath(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.files[p]
	switch {
	case !ok:
		return nil, sandbox.Errorf(sandbox.KindNotFound, "%s: no such file", p)
	case e.dir:
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "%s is not a regular file", p)
	}
	return slices.Clone(e.content), nil
}

// ListFiles lists what is under p, recursively, in the order of a walk of the tree.
func (s fileSession) ListFiles(_ context.Context, p string) ([]sandbox.FileInfo, error) {
	p, err := sandbox.CleanPath(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[p]; !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "%s: no such file or directory", p)
	}
	paths := s.files.under(p)
	slices.SortFunc(paths, func(a, b string) int {
		return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
	})
	out := make([]sandbox.FileInfo, 0, len(paths))
	for _, q := range paths {
		e := s.files[q]
		fi := sandbox.FileInfo{Path: q, Size: int64(len(e.content)), Mode: 0o644, ModTime: e.mod}
		if e.dir {
			fi.Dir, fi.Mode, fi.Size = true, uint32(fs.ModeDir|0o755), 0
		}
		out = append(out, fi)
	}
	return out, nil
}

// RemoveFile removes p, a directory with everything under it.
func (s fileSession) RemoveFile(_ context.Context, p string) error {
	p, err := sandbox.CleanPath(p)
	if err != nil {
		return err
	}
	if p == sandbox.WorkDir {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "the work directory itself cannot be deleted")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[p]; !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "%s: no such file or directory", p)
	}
	for _, q := range s.files.under(p) {
		delete(s.files, q)
	}
	delete(s.files, p)
	return nil
}
