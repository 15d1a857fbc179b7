package snapstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Store is a content-addressed store in a directory. It is safe for concurrent use by the
// goroutines of one process; one daemon owns a data directory.
type Store struct {
	dir string
	// remote, when set, is where the store's contents live (remote.go); dir is then this
	// machine's cache of it.
	remote *remoteState
	// gcMu keeps GC from running while a writer has blobs whose manifest is not written yet:
	// writers hold it shared from their first blob to their manifest (Begin).
	gcMu sync.RWMutex
}

// Open opens (creating) the store in dir.
func Open(dir string) (*Store, error) {
	for _, d := range []string{"blobs", "manifests", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("snapstore: %w", err)
		}
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Digest names data as the store does.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (s *Store) path(kind, digest string) (string, error) {
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return "", fmt.Errorf("snapstore: %q is not a digest", digest)
	}
	return filepath.Join(s.dir, kind, digest[:2], digest), nil
}

// Begin marks the start of a snapshot's writes: GC waits until the returned function is called,
// after the manifest is written, so that it never collects blobs a manifest is about to name.
func (s *Store) Begin() (end func()) {
	s.gcMu.RLock()
	return s.gcMu.RUnlock
}

// Put stores data as a blob and returns its digest and how many bytes it added to the store (0
// when it was there already).
func (s *Store) Put(data []byte) (string, int64, error) {
	d := Digest(data)
	n, err := s.write("blobs", d, data)
	return d, n, err
}

func (s *Store) write(kind, d string, data []byte) (int64, error) {
	p, err := s.path(kind, d)
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(p); err == nil {
		touch(p)
		return 0, s.keep(kind, d, p)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, fmt.Errorf("snapstore: %w", err)
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), d[:8]+"-*")
	if err != nil {
		return 0, fmt.Errorf("snapstore: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		// The remote copy first: a file in the cache means the remote store has it.
		werr = s.upload(kind, d, f.Name())
	}
	if werr == nil {
		werr = os.Rename(f.Name(), p)
	}
	if werr != nil {
		os.Remove(f.Name())
		return 0, fmt.Errorf("snapstore: write %s: %w", d[:12], werr)
	}
	return int64(len(data)), nil
}

// Get returns a blob's bytes, checked against its digest.
func (s *Store) Get(digest string) ([]byte, error) { return s.read("blobs", digest) }

func (s *Store) read(kind, d string) ([]byte, error) {
	p, err := s.path(kind, d)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) && s.remote != nil {
		if err = s.fetch(kind, d, p); err == nil {
			b, err = os.ReadFile(p)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("snapstore: %s %s: %w", strings.TrimSuffix(kind, "s"), d[:12], ErrNotFound)
		}
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	if Digest(b) != d {
		return nil, fmt.Errorf("snapstore: %s %s is corrupt (its digest differs)", strings.TrimSuffix(kind, "s"), d[:12])
	}
	return b, nil
}

// touch marks a blob reused now, so that a collection in another process keeps it until the
// manifest naming it is written.
func touch(p string) {
	now := time.Now()
	_ = os.Chtimes(p, now, now)
}

// ErrNotFound: no blob or manifest of that digest (collected, or never written).
var ErrNotFound = errors.New("not in the snapshot store")

// manifest is a manifest's stored form.
type manifest struct {
	Refs []string `json:"refs"`
	Body []byte   `json:"body"`
}

// PutManifest stores a manifest naming the blobs refs, with a body of the tier's own, and returns
// its digest (the snapshot's reference) and the bytes it added.
func (s *Store) PutManifest(refs []string, body []byte) (string, int64, error) {
	b, err := json.Marshal(manifest{Refs: refs, Body: body})
	if err != nil {
		return "", 0, err
	}
	d := Digest(b)
	n, err := s.write("manifests", d, b)
	return d, n, err
}

// Manifest returns a manifest's blob references and body.
func (s *Store) Manifest(digest string) (refs []string, body []byte, err error) {
	b, err := s.read("manifests", digest)
	if err != nil {
		return nil, nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, fmt.Errorf("snapstore: manifest %s: %w", digest[:12], err)
	}
	return m.Refs, m.Body, nil
}

// Usage is what the store holds.
type Usage struct {
	Blobs, Manifests int
	Bytes            int64
}

// GC removes every manifest not in roots and every blob no kept manifest names, and returns what
// it removed. Unknown roots are ignored. Manifests and blobs written in the last minute are kept
// whatever the roots: in a store several processes share (nodes of a cluster, package
// sharedstore) a writer elsewhere may have stored blobs whose manifest is not written yet, which
// Begin cannot see; a blob a writer reuses (Put of bytes the store has) counts as written then.
func (s *Store) GC(roots []string) (Usage, error) {
	if s.remote != nil {
		// Outside gcMu: the remote's grace (remote.go), not the lock, keeps what writers on
		// this and other machines are about to name.
		if err := s.remoteGC(roots); err != nil {
			return Usage{}, err
		}
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	keepM := map[string]bool{}
	keepB := map[string]bool{}
	// A manifest written in the last minute may not be among the caller's roots yet (its
	// reference is on its way to the session's record): it is kept, with its blobs.
	_ = filepath.WalkDir(filepath.Join(s.dir, "manifests"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < time.Minute {
				roots = append(roots, e.Name())
			}
		}
		return nil
	})
	for _, r := range roots {
		if r == "" || keepM[r] {
			continue
		}
		refs, _, err := s.Manifest(r)
		if err != nil {
			continue
		}
		keepM[r] = true
		for _, b := range refs {
			keepB[b] = true
		}
	}
	var freed Usage
	for _, kind := range []string{"manifests", "blobs"} {
		keep := keepB
		if kind == "manifests" {
			keep = keepM
		}
		err := filepath.WalkDir(filepath.Join(s.dir, kind), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || keep[e.Name()] {
				return nil
			}
			info, ierr := e.Info()
			if ierr == nil && time.Since(info.ModTime()) < time.Minute {
				return nil // written (or reused) just now, for a manifest on its way (see GC)
			}
			if os.Remove(p) == nil {
				if ierr == nil {
					freed.Bytes += info.Size()
				}
				if kind == "blobs" {
					freed.Blobs++
				} else {
					freed.Manifests++
				}
			}
			return nil
		})
		if err != nil {
			return freed, err
		}
	}
	// Temporary files of writes a killed daemon left behind.
	tmp, _ := os.ReadDir(filepath.Join(s.dir, "tmp"))
	for _, e := range tmp {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
			os.Remove(filepath.Join(s.dir, "tmp", e.Name()))
		}
	}
	return freed, nil
}

// Collect is GC for the Manager (sandbox.SnapshotCollector).
func (s *Store) Collect(roots []string) error {
	_, err := s.GC(roots)
	return err
}

// Usage counts what the store holds.
func (s *Store) Usage() Usage {
	var u Usage
	for _, kind := range []string{"manifests", "blobs"} {
		_ = filepath.WalkDir(filepath.Join(s.dir, kind), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			if info, err := e.Info(); err == nil {
				u.Bytes += info.Size()
			}
			if kind == "blobs" {
				u.Blobs++
			} else {
				u.Manifests++
			}
			return nil
		})
	}
	return u
}

// PutFile moves the file at path into the store as a blob and returns its digest and the bytes
// it added (0 when the store had it: the file is then removed). The file is read once, to hash
// it, and renamed, not copied: path must be on the store's file system (write it under TmpDir).
// For large blobs a tier writes to disk anyway (a gVisor checkpoint image), without holding
// them in memory.
func (s *Store) PutFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("snapstore: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", 0, fmt.Errorf("snapstore: hashing %s: %w", filepath.Base(path), err)
	}
	d := hex.EncodeToString(h.Sum(nil))
	p, _ := s.path("blobs", d)
	if _, err := os.Stat(p); err == nil {
		touch(p)
		os.Remove(path)
		return d, 0, s.keep("blobs", d, p)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", 0, fmt.Errorf("snapstore: %w", err)
	}
	if err := s.upload("blobs", d, path); err != nil {
		return "", 0, err
	}
	if err := os.Rename(path, p); err != nil {
		return "", 0, fmt.Errorf("snapstore: %w", err)
	}
	return d, n, nil
}

// TmpDir is where a writer puts a file before PutFile takes it; files left there are collected.
func (s *Store) TmpDir() string { return filepath.Join(s.dir, "tmp") }

// LinkBlob makes dst a hard link to a blob (or a copy, on another file system), for a tier that
// needs the blob as a file of its own name (a checkpoint image restored by runsc). The blob's
// size is checked, not its digest: hashing hundreds of megabytes would cost what the link saves.
func (s *Store) LinkBlob(digest, dst string) error {
	p, err := s.path("blobs", digest)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) && s.remote != nil {
		if err := s.fetch("blobs", digest, p); err != nil {
			return err
		}
	}
	if err := os.Link(p, dst); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("snapstore: blob %s: %w", digest[:12], ErrNotFound)
		}
		src, oerr := os.Open(p)
		if oerr != nil {
			return fmt.Errorf("snapstore: %w", oerr)
		}
		defer src.Close()
		out, cerr := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if cerr != nil {
			return fmt.Errorf("snapstore: %w", cerr)
		}
		_, werr := io.Copy(out, src)
		if err := out.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("snapstore: copy of blob %s: %w", digest[:12], werr)
		}
	}
	return nil
}
