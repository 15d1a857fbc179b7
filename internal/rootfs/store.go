package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Store is the directory images are built into and read from.
type Store struct {
	Dir string
}

// Image is a built image.
type Image struct {
	Dir      string // NAME/HASH
	Manifest Manifest
}

// Rootfs is the image's root file system.
func (i Image) Rootfs() string { return filepath.Join(i.Dir, "rootfs") }

// GuestPath is where the guest agent lives inside the image.
const GuestPath = "/.agentbox/agentbox-guest"

// Get returns the current build of the named image.
func (s Store) Get(name string) (Image, error) {
	dir, err := filepath.EvalSymlinks(filepath.Join(s.Dir, name, "current"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Image{}, fmt.Errorf("image %q is not built in %s: run `agentbox image build %s`", name, s.Dir, name)
		}
		return Image{}, err
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w (rebuild it: agentbox image build --force %s)", name, err, name)
	}
	img := Image{Dir: dir, Manifest: m}
	if _, err := os.Stat(filepath.Join(img.Rootfs(), strings.TrimPrefix(GuestPath, "/"))); err != nil {
		return Image{}, fmt.Errorf("image %q has no guest agent: run `agentbox image build %s`", name, name)
	}
	return img, nil
}

// List returns every built image (its current build), by name.
func (s Store) List() ([]Image, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		img, err := s.Get(e.Name())
		if err != nil {
			continue
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Manifest.Name < out[j].Manifest.Name })
	return out, nil
}

// setCurrent points NAME/current at HASH atomically.
func (s Store) setCurrent(name, hash string) error {
	link := filepath.Join(s.Dir, name, "current")
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(hash, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}
