package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Pruned is one directory Prune removed.
type Pruned struct {
	Path  string
	Bytes int64
}

// Prune removes the builds of every image other than its current one, and build directories
// left by builds that died more than a day ago. A build of a changed recipe keeps the old one
// (a daemon started before the build may still run sandboxes on it), so old builds accumulate
// at about 1.2 GB each until pruned. The caller makes sure no daemon uses this store.
func (s Store) Prune() ([]Pruned, error) {
	names, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Pruned
	for _, n := range names {
		if !n.IsDir() || strings.HasPrefix(n.Name(), ".") {
			continue
		}
		dir := filepath.Join(s.Dir, n.Name())
		current, _ := os.Readlink(filepath.Join(dir, "current"))
		ents, err := os.ReadDir(dir)
		if err != nil {
			return out, err
		}
		for _, e := range ents {
			if !e.IsDir() || e.Name() == current {
				continue
			}
			if strings.HasPrefix(e.Name(), ".build-") {
				if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < 24*time.Hour {
					continue // maybe a build in progress
				}
			} else if _, err := ReadManifest(filepath.Join(dir, e.Name())); err != nil {
				continue // not a build of ours
			}
			p := filepath.Join(dir, e.Name())
			size := duBytes(p)
			if err := os.RemoveAll(p); err != nil {
				return out, err
			}
			out = append(out, Pruned{Path: p, Bytes: size})
		}
	}
	return out, nil
}
