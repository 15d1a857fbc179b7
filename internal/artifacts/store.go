package artifacts

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Store keeps artifacts as files: ID.bin holds the content, ID.json its description. Writes go to
// a temporary file first, so a reader never sees half an artifact.
type Store struct {
	dir      string
	ttl      time.Duration
	maxBytes int64

	mu   sync.Mutex // serialises Put's eviction
	last time.Time  // last sweep
}

// Options bound a Store. Zero values take the defaults.
type Options struct {
	// TTL is how long an artifact is kept after it was made. Default 24h.
	TTL time.Duration
	// MaxBytes bounds the store; the oldest artifacts go first when a new one does not fit.
	// Default 1 GiB.
	MaxBytes int64
}

// Interface guards.
var _ sandbox.ArtifactStore = (*Store)(nil)

// Open creates the directory if needed and sweeps expired artifacts.
func Open(dir string, opts Options) (*Store, error) {
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 30
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	s := &Store{dir: dir, ttl: opts.TTL, maxBytes: opts.MaxBytes}
	s.sweep(0)
	return s, nil
}

// meta is what ID.json holds.
type meta struct {
	sandbox.Artifact
	Created time.Time `json:"created"`
}

// Put stores a.Content, sets a.ID (and Size and SHA256 from the content, whatever the runtime
// said) and drops the content from a.
func (s *Store) Put(a *sandbox.Artifact) error {
	sum := sha256.Sum256(a.Content)
	a.SHA256 = hex.EncodeToString(sum[:])
	a.Size = int64(len(a.Content))
	if a.Size > s.maxBytes {
		return fmt.Errorf("artifact %q: %d bytes is more than the store holds (%d)", a.Name, a.Size, s.maxBytes)
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	a.ID = "art_" + hex.EncodeToString(id[:])
	m := meta{Artifact: *a, Created: time.Now().UTC()}
	m.Content = nil
	desc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(a.Size)
	if err := writeFile(filepath.Join(s.dir, a.ID+".bin"), a.Content); err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	if err := writeFile(filepath.Join(s.dir, a.ID+".json"), desc); err != nil {
		os.Remove(filepath.Join(s.dir, a.ID+".bin"))
		return fmt.Errorf("artifacts: %w", err)
	}
	a.Content = nil
	return nil
}

// Open returns an artifact's description and its content, which the caller closes.
func (s *Store) Open(id string) (sandbox.Artifact, io.ReadSeekCloser, error) {
	if !validID(id) {
		return sandbox.Artifact{}, nil, fmt.Errorf("artifact %q: %w", id, sandbox.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return sandbox.Artifact{}, nil, fmt.Errorf("artifact %q (artifacts are kept %v): %w", id, s.ttl, sandbox.ErrNotFound)
	}
	if err != nil {
		return sandbox.Artifact{}, nil, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return sandbox.Artifact{}, nil, fmt.Errorf("artifact %q: damaged description: %w", id, err)
	}
	if time.Since(m.Created) > s.ttl {
		return sandbox.Artifact{}, nil, fmt.Errorf("artifact %q expired (artifacts are kept %v): %w", id, s.ttl, sandbox.ErrNotFound)
	}
	f, err := os.Open(filepath.Join(s.dir, id+".bin"))
	if errors.Is(err, fs.ErrNotExist) {
		return sandbox.Artifact{}, nil, fmt.Errorf("artifact %q: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return sandbox.Artifact{}, nil, err
	}
	return m.Artifact, f, nil
}

func validID(id string) bool {
	if !strings.HasPrefix(id, "art_") || len(id) != 4+24 {
		return false
	}
	_, err := hex.DecodeString(id[4:])
	return err == nil
}

// sweep removes expired artifacts, then the oldest until need more bytes fit. A full sweep runs
// at most once a minute unless space is needed.
func (s *Store) sweep(need int64) {
	if need == 0 && time.Since(s.last) < time.Minute {
		return
	}
	s.last = time.Now()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type item struct {
		id   string
		mod  time.Time
		size int64
	}
	var items []item
	var total int64
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				os.Remove(filepath.Join(s.dir, name))
			}
			continue
		}
		id, ok := strings.CutSuffix(name, ".bin")
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if time.Since(info.ModTime()) > s.ttl {
			s.remove(id)
			continue
		}
		items = append(items, item{id, info.ModTime(), info.Size()})
		total += info.Size()
	}
	sort.Slice(items, func(i, j int) bool { return items[i].mod.Before(items[j].mod) })
	for _, it := range items {
		if total+need <= s.maxBytes {
			break
		}
		s.remove(it.id)
		total -= it.size
	}
}

// OwnerBytes is the size of the unexpired artifacts owner's runs made: what a tenant's stored
// bytes quota counts. It reads every description, so it costs a directory read per call; the
// Manager asks only for tenants with that quota.
func (s *Store) OwnerBytes(owner string) int64 {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue
		}
		var m meta
		if json.Unmarshal(b, &m) == nil && m.Owner == owner && time.Since(m.Created) <= s.ttl {
			n += m.Size
		}
	}
	return n
}

func (s *Store) remove(id string) {
	os.Remove(filepath.Join(s.dir, id+".json"))
	os.Remove(filepath.Join(s.dir, id+".bin"))
}

func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
