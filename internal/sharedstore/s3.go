package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/s3"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// S3 is the shared store in a bucket of an S3-compatible server (AWS S3, SeaweedFS, Ceph RGW,
// MinIO, ...), under a prefix:
//
//	PREFIX/records/SESSION/EPOCH.json        a session's record at each epoch still kept
//	PREFIX/snapshots/{blobs,manifests}/XX/D  the snapshot store's objects (content-addressed)
//
// Fencing rests on the server's conditional writes, as Dir's rests on link(2): a new epoch (a
// create or a claim) is a PUT with If-None-Match: *, which exactly one of concurrent writers
// wins; a rewrite at an epoch is a PUT with If-Match: the ETag the writer read, so two writes
// never interleave a read and a write. A listing of the session's keys finds its latest epoch
// (S3's listings are strongly consistent since 2020, as are the compatible servers').
//
// Snapshots are written through a cache on this machine (snapstore.OpenCache): a blob counts as
// written once the bucket has it; a node reads what its cache misses from the bucket.
type S3 struct {
	c     *s3.Client
	snaps *snapstore.Store
	ns    string // "records" (sessions), or "volumes" (Volumes)
}

// Interface guards.
var (
	_ Store            = (*S3)(nil)
	_ snapstore.Remote = s3Remote{}
)

// OpenS3 opens the shared store in the client's bucket and prefix, with cacheDir as this
// node's cache of its snapshots.
func OpenS3(c *s3.Client, cacheDir string) (*S3, error) {
	snaps, err := snapstore.OpenCache(cacheDir, s3Remote{c})
	if err != nil {
		return nil, err
	}
	return &S3{c: c, snaps: snaps, ns: "records"}, nil
}

// Volumes are the records of the cluster's volumes (package volumes), under PREFIX/volumes/: the
// same fenced records as the sessions', beside them.
func (s *S3) Volumes() Records {
	v := *s
	v.ns = "volumes"
	return &v
}

// Client is the store's S3 client.
func (s *S3) Client() *s3.Client { return s.c }

// Snapshots is the snapshot store every node writes its sessions' durable snapshots into and
// restores them from (through its cache).
func (s *S3) Snapshots() *snapstore.Store { return s.snaps }

func (s *S3) recordsPrefix(id string) (string, error) {
	if !sessionID.MatchString(id) {
		return "", fmt.Errorf("sharedstore: %q is not a session id", id)
	}
	return s.ns + "/" + id + "/", nil
}

// epochs lists the epochs a session has objects for, oldest first.
func (s *S3) epochs(ctx context.Context, id string) ([]uint64, error) {
	pre, err := s.recordsPrefix(id)
	if err != nil {
		return nil, err
	}
	var out []uint64
	_, err = s.c.List(ctx, pre, func(o s3.Object) error {
		n, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, pre), ".json")
		if v, err := strconv.ParseUint(n, 10, 64); ok && err == nil {
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sharedstore: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

func (s *S3) recordKey(id string, e uint64) string { return s.ns + "/" + id + "/" + epochName(e) }

// latest reads the session's record at its latest epoch, with the object's ETag; a session
// whose latest epoch is a close's tombstone has none (ErrNotFound).
func (s *S3) latest(ctx context.Context, id string) (Record, string, error) {
	r, etag, err := s.latestRaw(ctx, id)
	if err == nil && r.Closed {
		return Record{}, "", fmt.Errorf("session %s (closed): %w", id, ErrNotFound)
	}
	return r, etag, err
}

// latestRaw is latest, a tombstone included.
func (s *S3) latestRaw(ctx context.Context, id string) (Record, string, error) {
	for range 5 { // a claim's cleanup may remove an old epoch between the listing and the read
		es, err := s.epochs(ctx, id)
		if err != nil {
			return Record{}, "", err
		}
		if len(es) == 0 {
			return Record{}, "", fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		b, o, err := s.c.GetBytes(ctx, s.recordKey(id, es[len(es)-1]))
		if errors.Is(err, s3.ErrNotFound) {
			continue
		}
		if err != nil {
			return Record{}, "", fmt.Errorf("sharedstore: %w", err)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return Record{}, "", fmt.Errorf("sharedstore: session %s's record: %w", id, err)
		}
		return r, o.ETag, nil
	}
	return Record{}, "", fmt.Errorf("sharedstore: session %s's records kept changing under the read", id)
}

func encode(rec Record) ([]byte, Record, error) {
	rec.Updated = time.Now().UTC()
	b, err := json.Marshal(rec)
	return b, rec, err
}

// Create writes a new session's first record: at epoch 1, or after the tombstone of a closed
// record of the same name (a volume made again), at the epoch after it.
func (s *S3) Create(ctx context.Context, rec Record) (Record, error) {
	es, err := s.epochs(ctx, rec.Session)
	if err != nil {
		return Record{}, err
	}
	epoch := uint64(1)
	if len(es) > 0 {
		cur, _, err := s.latestRaw(ctx, rec.Session)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Record{}, err
		}
		if err == nil && !cur.Closed {
			return Record{}, fmt.Errorf("session %s: %w", rec.Session, ErrExists)
		}
		if err == nil {
			epoch = cur.Epoch + 1
		}
	}
	rec.Epoch, rec.Released, rec.Closed = epoch, false, false
	b, rec, err := encode(rec)
	if err != nil {
		return Record{}, err
	}
	if _, err := s.c.PutBytes(ctx, s.recordKey(rec.Session, epoch), b, s3.PutOptions{IfNoneMatch: true, ContentType: "application/json"}); err != nil {
		if errors.Is(err, s3.ErrPrecondition) {
			return Record{}, fmt.Errorf("session %s: %w", rec.Session, ErrExists)
		}
		return Record{}, fmt.Errorf("sharedstore: %w", err)
	}
	if epoch > 1 {
		s.dropBefore(ctx, rec.Session, epoch)
	}
	return rec, nil
}

// Get returns the session's current record.
func (s *S3) Get(ctx context.Context, id string) (Record, error) {
	r, _, err := s.latest(ctx, id)
	return r, err
}

// Put rewrites the session's record at its epoch, if that is still the latest and rec.Owner
// owns it. The write is conditional on the ETag read with the check.
func (s *S3) Put(ctx context.Context, rec Record) error {
	for attempt := range 10 {
		cur, etag, err := s.latest(ctx, rec.Session)
		if err != nil {
			return err
		}
		if cur.Epoch != rec.Epoch || cur.Owner != rec.Owner {
			return &FencedError{Current: cur}
		}
		b, _, err := encode(rec)
		if err != nil {
			return err
		}
		// A claim of the next epoch between the check and this write leaves it at the old
		// epoch, under the new one: the new owner never reads it.
		_, err = s.c.PutBytes(ctx, s.recordKey(rec.Session, rec.Epoch), b, s3.PutOptions{IfMatch: etag, ContentType: "application/json"})
		if err == nil {
			return nil
		}
		if !errors.Is(err, s3.ErrPrecondition) {
			if errors.Is(err, s3.ErrNotFound) {
				return fmt.Errorf("session %s: %w", rec.Session, ErrNotFound)
			}
			return fmt.Errorf("sharedstore: %w", err)
		}
		backoff(ctx, attempt) // another write of the same epoch came between: read again
	}
	return fmt.Errorf("sharedstore: session %s's record kept changing under the write", rec.Session)
}

func backoff(ctx context.Context, attempt int) {
	t := time.NewTimer(time.Duration(10*(attempt+1)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Claim takes the session at epoch from+1 for node: a create-if-absent of that epoch's object.
func (s *S3) Claim(ctx context.Context, id string, from uint64, node, addr string) (Record, error) {
	for attempt := range 20 {
		cur, _, err := s.latest(ctx, id)
		if err != nil {
			return Record{}, err
		}
		if cur.Epoch != from {
			return Record{}, &FencedError{Current: cur}
		}
		next := cur
		next.Owner, next.Addr, next.Epoch, next.Released = node, addr, from+1, false
		b, next, err := encode(next)
		if err != nil {
			return Record{}, err
		}
		_, err = s.c.PutBytes(ctx, s.recordKey(id, from+1), b, s3.PutOptions{IfNoneMatch: true, ContentType: "application/json"})
		if err == nil {
			s.dropBefore(ctx, id, from)
			return next, nil
		}
		if !errors.Is(err, s3.ErrPrecondition) {
			return Record{}, fmt.Errorf("sharedstore: %w", err)
		}
		// Another node's claim won (the next read names it), or (S3's 409) was under way and
		// may yet fail: read again, and claim again if it did.
		backoff(ctx, attempt)
		if ctx.Err() != nil {
			return Record{}, ctx.Err()
		}
	}
	return Record{}, fmt.Errorf("sharedstore: session %s: the claim of epoch %d kept conflicting", id, from+1)
}

// dropBefore removes the session's epochs before from: no one's any more.
func (s *S3) dropBefore(ctx context.Context, id string, from uint64) {
	es, err := s.epochs(ctx, id)
	if err != nil {
		return
	}
	for _, e := range es {
		if e < from {
			_ = s.c.Delete(ctx, s.recordKey(id, e))
		}
	}
}

// Delete removes the session's records, if epoch is still its latest. It first writes a
// tombstone at the next epoch, as a claim writes its record (a create-if-absent: one winner), so
// that a claim from epoch under way at the same moment either won before it (the close is
// fenced: the session lives on at its new owner) or loses to it (and finds the session gone):
// never a node holding an epoch of a session whose records are gone. The older epochs are then
// removed; the tombstone stays (a claim that read the old epoch long ago still meets it), and
// List removes it once older than tombstoneKeep.
func (s *S3) Delete(ctx context.Context, id string, epoch uint64) error {
	cur, _, err := s.latestRaw(ctx, id)
	if err != nil {
		return err
	}
	if cur.Closed {
		return fmt.Errorf("session %s (closed): %w", id, ErrNotFound)
	}
	if cur.Epoch != epoch {
		return &FencedError{Current: cur}
	}
	b, _, err := encode(Record{Session: id, Owner: cur.Owner, Epoch: epoch + 1, Closed: true})
	if err != nil {
		return err
	}
	if _, err := s.c.PutBytes(ctx, s.recordKey(id, epoch+1), b, s3.PutOptions{IfNoneMatch: true, ContentType: "application/json"}); err != nil {
		if !errors.Is(err, s3.ErrPrecondition) {
			return fmt.Errorf("sharedstore: %w", err)
		}
		won, _, rerr := s.latestRaw(ctx, id)
		switch {
		case rerr != nil:
			return rerr
		case won.Closed:
			return fmt.Errorf("session %s (closed): %w", id, ErrNotFound)
		}
		return &FencedError{Current: won}
	}
	es, err := s.epochs(ctx, id)
	if err != nil {
		return err
	}
	for _, e := range es {
		if e <= epoch {
			if err := s.c.Delete(ctx, s.recordKey(id, e)); err != nil {
				return fmt.Errorf("sharedstore: %w", err)
			}
		}
	}
	return nil
}

// tombstoneKeep is how long a close's tombstone stays: far longer than a claim takes between
// reading an epoch and writing the next.
const tombstoneKeep = 10 * time.Minute

// List returns every session's current record: one listing of all records' keys, then a read
// of each session's latest.
func (s *S3) List(ctx context.Context) ([]Record, error) {
	latest := map[string]uint64{}
	_, err := s.c.List(ctx, s.ns+"/", func(o s3.Object) error {
		id, name, ok := strings.Cut(strings.TrimPrefix(o.Key, s.ns+"/"), "/")
		n, _ := strings.CutSuffix(name, ".json")
		if v, err := strconv.ParseUint(n, 10, 64); ok && err == nil && v > latest[id] {
			latest[id] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sharedstore: %w", err)
	}
	ids := make([]string, 0, len(latest))
	for id := range latest {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []Record
	for _, id := range ids {
		b, _, err := s.c.GetBytes(ctx, s.recordKey(id, latest[id]))
		if errors.Is(err, s3.ErrNotFound) { // claimed or deleted since: read it again
			if r, _, err := s.latest(ctx, id); err == nil {
				out = append(out, r)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sharedstore: %w", err)
		}
		var r Record
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		if r.Closed {
			// A close's tombstone: no record; removed once no claim can be under way.
			if time.Since(r.Updated) > tombstoneKeep {
				_ = s.c.Delete(ctx, s.recordKey(id, latest[id]))
			}
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// Collect removes from the bucket every snapshot that neither roots nor any session's record
// refers to (and that is older than snapstore.RemoteGrace), and trims this node's cache.
func (s *S3) Collect(roots []string) error { return collect(s, s.snaps, roots, s.Volumes()) }

// s3Remote keeps a snapshot store's objects in the bucket, under snapshots/.
type s3Remote struct{ c *s3.Client }

func objKey(kind, d string) string { return "snapshots/" + kind + "/" + d[:2] + "/" + d }

func (r s3Remote) Upload(ctx context.Context, kind, d, path string) error {
	return r.c.PutFile(ctx, objKey(kind, d), path, d)
}

func (r s3Remote) Fetch(ctx context.Context, kind, d string, f *os.File) error {
	_, err := r.c.GetFile(ctx, objKey(kind, d), f)
	if errors.Is(err, s3.ErrNotFound) {
		return fmt.Errorf("%w: %w", snapstore.ErrNotFound, err)
	}
	return err
}

func (r s3Remote) Age(ctx context.Context, kind, d string) (time.Duration, error) {
	o, date, err := r.c.Head(ctx, objKey(kind, d))
	if errors.Is(err, s3.ErrNotFound) {
		return 0, fmt.Errorf("%w: %w", snapstore.ErrNotFound, err)
	}
	if err != nil {
		return 0, err
	}
	if date.IsZero() {
		date = time.Now()
	}
	return date.Sub(o.LastModified), nil
}

func (r s3Remote) List(ctx context.Context, kind string, fn func(string, time.Duration) error) error {
	type obj struct {
		d  string
		lm time.Time
	}
	var all []obj
	date, err := r.c.List(ctx, "snapshots/"+kind+"/", func(o s3.Object) error {
		d := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if len(d) == 64 {
			all = append(all, obj{d, o.LastModified})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if date.IsZero() {
		date = time.Now()
	}
	for _, o := range all {
		if err := fn(o.d, date.Sub(o.lm)); err != nil {
			return err
		}
	}
	return nil
}

func (r s3Remote) Delete(ctx context.Context, kind, d string) error {
	return r.c.Delete(ctx, objKey(kind, d))
}

// OpenURL opens the shared store a URL names: s3://BUCKET/PREFIX (with opts) or a directory.
// cacheDir is this node's cache of an S3 store's snapshots.
func OpenURL(url string, opts S3Options, cacheDir string) (Store, error) {
	rest, ok := strings.CutPrefix(url, "s3://")
	if !ok {
		return OpenDir(url)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	access, secret, token, err := s3.Credentials(opts.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("sharedstore %s: %w", url, err)
	}
	c, err := s3.New(s3.Config{Endpoint: opts.Endpoint, Region: opts.Region, Bucket: bucket, Prefix: prefix,
		PathStyle: opts.PathStyle, AccessKey: access, SecretKey: secret, SessionToken: token})
	if err != nil {
		return nil, fmt.Errorf("sharedstore %s: %w", url, err)
	}
	// Reach the bucket now: a node with a wrong endpoint or key fails at its start, not at its
	// first durable step.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.List(ctx, "records/", func(s3.Object) error { return errStop }); err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("sharedstore %s: the bucket does not answer: %w", url, err)
	}
	return OpenS3(c, cacheDir)
}

var errStop = errors.New("stop")

// S3Options say how to reach an s3:// store's server (config.S3Config).
type S3Options struct {
	Endpoint, Region string
	PathStyle        bool
	// CredentialsFile: an AWS shared-credentials file; empty: AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY from the environment.
	CredentialsFile string
}
