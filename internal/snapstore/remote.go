package snapstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Remote is storage beyond this machine that a Store keeps its blobs and manifests in (the
// cluster's S3-compatible store, package sharedstore): the Store's directory is then this
// machine's cache of it. Objects are named by kind ("blobs" or "manifests") and digest and never
// change once written (content addressing), so a cached copy is never stale.
type Remote interface {
	// Upload stores the file at path, whose SHA-256 is digest, as kind/digest, streamed from
	// the file. Writing an object that exists is no error (it refreshes its age).
	Upload(ctx context.Context, kind, digest, path string) error
	// Fetch writes kind/digest into f (from its start), whole: a short copy is an error. An
	// error wrapping ErrNotFound when there is none.
	Fetch(ctx context.Context, kind, digest string, f *os.File) error
	// Age says how long ago kind/digest was written, on the remote's clock. An error wrapping
	// ErrNotFound when there is none.
	Age(ctx context.Context, kind, digest string) (time.Duration, error)
	// List calls fn with every object of kind and its age.
	List(ctx context.Context, kind string, fn func(digest string, age time.Duration) error) error
	// Delete removes kind/digest.
	Delete(ctx context.Context, kind, digest string) error
}

// RemoteGrace: an object of the remote younger than this is never collected, whatever the
// roots: a writer on any machine may have stored it for a manifest, or a manifest for a record,
// not written yet. A writer that reuses an object (its cache has it) makes sure it is younger
// than RemoteGrace/2, rewriting it if not, so the object outlives the writer's next few minutes
// in any collection. A variable for tests only.
var RemoteGrace = 10 * time.Minute

const (
	// remoteGCEvery spaces a store's collections of the remote (each lists it whole).
	remoteGCEvery = time.Minute
	// remoteTimeout bounds one call to the remote; uploads of large blobs get remoteTimeout per
	// 64 MiB on top.
	remoteTimeout = 2 * time.Minute
)

type remoteState struct {
	r Remote
	// kept remembers when this process last made sure an object was on the remote and young
	// (uploaded, or its age checked): reuse within RemoteGrace/4 skips the check.
	mu     sync.Mutex
	kept   map[string]time.Time
	lastGC time.Time
	// inflight are the fetches under way, by kind/digest.
	inflight map[string]*transfer
}

// OpenCache opens (creating) a store whose contents live in remote, with dir as this machine's
// cache: writes go to the remote before they count as written; reads the cache misses come
// from the remote; GC collects the remote (every node's collection keeps what any session's
// record names: the caller's roots) and trims the cache.
func OpenCache(dir string, remote Remote) (*Store, error) {
	s, err := Open(dir)
	if err != nil {
		return nil, err
	}
	s.remote = &remoteState{r: remote, kept: map[string]time.Time{}}
	return s, nil
}

// Remote is the store's remote, or nil.
func (s *Store) Remote() Remote {
	if s.remote == nil {
		return nil
	}
	return s.remote.r
}

func remoteCtx(size int64) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), remoteTimeout*time.Duration(1+size/(64<<20)))
}

// upload puts the file at path on the remote as kind/d (nothing without a remote).
func (s *Store) upload(kind, d, path string) error {
	if s.remote == nil {
		return nil
	}
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	ctx, cancel := remoteCtx(size)
	defer cancel()
	if err := s.remote.r.Upload(ctx, kind, d, path); err != nil {
		return fmt.Errorf("snapstore: upload of %s %s: %w", kind, d[:12], err)
	}
	s.remote.mark(kind, d)
	return nil
}

func (r *remoteState) mark(kind, d string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept[kind+"/"+d] = time.Now()
}

// keep makes sure a reused object (p: its cached copy) is on the remote and young enough that
// no collection takes it before the manifest or record naming it is written.
func (s *Store) keep(kind, d, p string) error {
	if s.remote == nil {
		return nil
	}
	s.remote.mu.Lock()
	at, ok := s.remote.kept[kind+"/"+d]
	s.remote.mu.Unlock()
	if ok && time.Since(at) < RemoteGrace/4 {
		return nil
	}
	ctx, cancel := remoteCtx(0)
	age, err := s.remote.r.Age(ctx, kind, d)
	cancel()
	if err == nil && age < RemoteGrace/2 {
		s.remote.mark(kind, d)
		return nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("snapstore: %s %s on the remote: %w", kind, d[:12], err)
	}
	return s.upload(kind, d, p) // gone, or old: written again
}

// fetch copies kind/d from the remote into the cache at p. Its content is not hashed here: a
// blob or manifest read into memory is checked against its digest by read; a blob linked for a
// tier (LinkBlob: a checkpoint of hundreds of MB) is checked by its size (Fetch's copy is whole),
// as a local one is, since hashing it would cost much of what the transfer does.
func (s *Store) fetch(kind, d, p string) error {
	// One transfer per object at a time: a restore that needs a blob being fetched ahead
	// (Prefetch) waits for that transfer rather than starting a second one beside it.
	r := s.remote
	key := kind + "/" + d
	r.mu.Lock()
	if r.inflight == nil {
		r.inflight = map[string]*transfer{}
	}
	if t, ok := r.inflight[key]; ok {
		r.mu.Unlock()
		<-t.done
		if t.err == nil {
			return nil
		}
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		return t.err
	}
	t := &transfer{done: make(chan struct{})}
	r.inflight[key] = t
	r.mu.Unlock()
	t.err = s.fetchOnce(kind, d, p)
	r.mu.Lock()
	delete(r.inflight, key)
	r.mu.Unlock()
	close(t.done)
	return t.err
}

// transfer is a fetch under way.
type transfer struct {
	done chan struct{}
	err  error
}

func (s *Store) fetchOnce(kind, d, p string) error {
	if _, err := os.Stat(p); err == nil {
		return nil // fetched by a transfer that ended just now
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), d[:8]+"-fetch-*")
	if err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	defer os.Remove(f.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ferr := s.remote.r.Fetch(ctx, kind, d, f)
	if cerr := f.Close(); ferr == nil {
		ferr = cerr
	}
	if ferr != nil {
		if errors.Is(ferr, ErrNotFound) {
			return fmt.Errorf("snapstore: %s %s: %w", kind[:len(kind)-1], d[:12], ErrNotFound)
		}
		return fmt.Errorf("snapstore: fetching %s %s: %w", kind[:len(kind)-1], d[:12], ferr)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	s.remote.mark(kind, d)
	return nil
}

// remoteGC removes from the remote every manifest not in roots and every blob no kept manifest
// names, keeping whatever is younger than RemoteGrace; at most once per remoteGCEvery.
func (s *Store) remoteGC(roots []string) error {
	r := s.remote
	r.mu.Lock()
	if time.Since(r.lastGC) < remoteGCEvery {
		r.mu.Unlock()
		return nil
	}
	r.lastGC = time.Now()
	for k, at := range r.kept {
		if time.Since(at) > RemoteGrace {
			delete(r.kept, k)
		}
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	keepM := map[string]bool{}
	var oldM []string
	err := r.r.List(ctx, "manifests", func(d string, age time.Duration) error {
		if age < RemoteGrace {
			keepM[d] = true
		} else {
			oldM = append(oldM, d)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("snapstore: listing the remote's manifests: %w", err)
	}
	for _, root := range roots {
		if root != "" {
			keepM[root] = true
		}
	}
	keepB := map[string]bool{}
	for m := range keepM {
		refs, _, err := s.Manifest(m)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err // keep everything rather than collect a blob a manifest may name
		}
		for _, b := range refs {
			keepB[b] = true
		}
	}
	for _, m := range oldM {
		if !keepM[m] {
			_ = r.r.Delete(ctx, "manifests", m)
		}
	}
	var drop []string
	err = r.r.List(ctx, "blobs", func(d string, age time.Duration) error {
		if !keepB[d] && age >= RemoteGrace {
			drop = append(drop, d)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("snapstore: listing the remote's blobs: %w", err)
	}
	for _, d := range drop {
		_ = r.r.Delete(ctx, "blobs", d)
	}
	return nil
}

// Prefetch brings a snapshot (its manifest and every blob it names) into this machine's cache
// from the remote, where the cache lacks it, and returns the bytes it fetched: a node that may
// soon restore it (a session moving in from a node that is gone) then reads it locally. The
// blobs come down a few at once. Nothing to do without a remote.
func (s *Store) Prefetch(ref string) (int64, error) {
	if s.remote == nil {
		return 0, nil
	}
	refs, _, err := s.Manifest(ref)
	if err != nil {
		return 0, err
	}
	var (
		mu      sync.Mutex
		fetched int64
		first   error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, 4)
	for _, d := range refs {
		p, err := s.path("blobs", d)
		if err != nil {
			return 0, err
		}
		if _, err := os.Stat(p); err == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := s.fetch("blobs", d, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			if st, err := os.Stat(p); err == nil {
				fetched += st.Size()
			}
		}()
	}
	wg.Wait()
	return fetched, first
}
