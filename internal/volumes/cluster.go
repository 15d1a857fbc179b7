package volumes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/agentbox-dev/agentbox/internal/dirtar"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// A cluster's volumes (issue 18). On a node, a volume is the cluster's, not the node's: its record
// lives in the shared store beside the sessions' (sharedstore Volumes()), fenced the same way,
// and holds its meta, the read-write lease's holder (a session id) and its latest content (a
// manifest of the snapshot store naming a tar of its files, so the store's collection keeps it).
// Each node keeps a local copy (the ext4 image of today, under its own state directory) as a
// cache of that content: attaching a volume whose local copy is missing, of another volume of the
// same name, or older than the record makes it again from the content. A read-write lease is
// taken by claiming the record (the next epoch, this node the owner) and writing the holder; it
// ends by writing the files back as the new content, at the epoch it was taken at, so a node that
// lost the volume to another (its session adopted elsewhere) changes nothing. A holder whose
// session has no record any more (closed, or its node gone before it was ever durable) no longer
// holds the volume. A moved session takes its own lease again on its new node; its files come
// from its checkpoint (package heavy), newer than the record's content.
//
// Each durable step of the holder records its volume's files as the content too (Checkpointed).
//
// A read-only lease names its session among the record's readers (so a writer on any node meets
// it) and mounts this node's copy of the latest content read-only. The files API writes a new
// content; its reads see a volume held read-write on another node as of the holder's last durable
// step.

// Cluster makes a Store a cluster node's (Options.Cluster).
type Cluster struct {
	// Records are the volumes' records (sharedstore.Dir/S3 Volumes()).
	Records sharedstore.Records
	// Sessions are the sessions' records: a lease whose holder has none is over.
	Sessions sharedstore.Records
	// Snapshots keeps the volumes' contents.
	Snapshots *snapstore.Store
	// Node and Addr name this node in the records it writes.
	Node, Addr string
	Log        *slog.Logger
}

// record is a volume's record's data.
type record struct {
	meta
	// ID is this volume's, made at its creation: a local copy of an earlier volume of the same
	// name is not this one's.
	ID string `json:"id"`
	// Content is the snapshot store's manifest of its files' tar; "" while it is empty.
	Content string `json:"content,omitempty"`
	// Holder is the session holding it read-write, if any.
	Holder string `json:"holder,omitempty"`
	// Readers are the sessions holding it read-only, with their nodes.
	Readers map[string]string `json:"readers,omitempty"`
}

// local is what volume.json keeps on a node of a cluster: the meta and what its image holds.
type local struct {
	meta
	ID      string `json:"id,omitempty"`
	Content string `json:"content,omitempty"`
}

// recordKey names tenant's volume name in the shared store (a name the records accept).
func recordKey(tenant, name string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + name))
	return "vol-" + hex.EncodeToString(h[:20])
}

func cctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

// get reads tenant's volume name's record.
func (c *Cluster) get(tenant, name string) (sharedstore.Record, record, error) {
	if err := CheckName(name); err != nil {
		return sharedstore.Record{}, record{}, err
	}
	ctx, cancel := cctx()
	defer cancel()
	rec, err := c.Records.Get(ctx, recordKey(tenant, name))
	if errors.Is(err, sharedstore.ErrNotFound) {
		return rec, record{}, notFound(name)
	}
	if err != nil {
		return rec, record{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "volume %q: the shared store: %v", name, err)
	}
	var r record
	if err := json.Unmarshal(rec.Data, &r); err != nil || r.Tenant != tenant || r.Name != name {
		return rec, record{}, notFound(name)
	}
	return rec, r, nil
}

// held reports whether r's read-write holder still holds it: its session has a record.
func (c *Cluster) held(r record) bool { return r.Holder != "" && c.live(r.Holder) }

// live reports whether session has a record (a session gone holds nothing).
func (c *Cluster) live(session string) bool {
	ctx, cancel := cctx()
	defer cancel()
	_, err := c.Sessions.Get(ctx, session)
	return !errors.Is(err, sharedstore.ErrNotFound)
}

// reader returns a session other than except that holds r read-only, and its node.
func (c *Cluster) reader(r record, except string) (string, string, bool) {
	for s, n := range r.Readers {
		if s != except && c.live(s) {
			return s, n, true
		}
	}
	return "", "", false
}

// setReader adds session as a reader of tenant's volume name (on this node), or removes it.
// Concurrent changes on other nodes fence a write: it is read and tried again.
func (c *Cluster) setReader(tenant, name, session string, add bool) error {
	var err error
	for range 5 {
		var rec sharedstore.Record
		var r record
		if rec, r, err = c.get(tenant, name); err != nil {
			return err
		}
		if add && r.Holder != "" && c.held(r) {
			return sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted read-write by another session (on node %s); it cannot be mounted read-only beside it", name, rec.Owner).
				WithHint("a volume is mounted read-write by one session at a time: close that session, or wait")
		}
		if _, ok := r.Readers[session]; ok == add && (!add || r.Readers[session] == c.Node) {
			return nil
		}
		if r.Readers == nil {
			r.Readers = map[string]string{}
		}
		if add {
			r.Readers[session] = c.Node
		} else {
			delete(r.Readers, session)
		}
		if rec, err = c.own(rec, name); err == nil {
			if _, err = c.put(rec, r, name); err == nil {
				return nil
			}
		}
		if sandbox.KindOf(err) != sandbox.KindConflict {
			return err
		}
	}
	return err
}

// own makes this node the record's owner (the next epoch), so that it may write it.
func (c *Cluster) own(rec sharedstore.Record, name string) (sharedstore.Record, error) {
	if rec.Owner == c.Node {
		return rec, nil
	}
	ctx, cancel := cctx()
	defer cancel()
	out, err := c.Records.Claim(ctx, rec.Session, rec.Epoch, c.Node, c.Addr)
	if err != nil {
		return rec, fenced(name, err)
	}
	return out, nil
}

// put writes r at rec's epoch.
func (c *Cluster) put(rec sharedstore.Record, r record, name string) (sharedstore.Record, error) {
	rec.Data, _ = json.Marshal(r)
	rec.Refs = nil
	if r.Content != "" {
		rec.Refs = []string{r.Content}
	}
	rec.Owner, rec.Addr, rec.Updated = c.Node, c.Addr, time.Now().UTC()
	ctx, cancel := cctx()
	defer cancel()
	if err := c.Records.Put(ctx, rec); err != nil {
		return rec, fenced(name, err)
	}
	return rec, nil
}

func fenced(name string, err error) error {
	if errors.Is(err, sharedstore.ErrFenced) || errors.Is(err, sharedstore.ErrNotFound) {
		return sandbox.Errorf(sandbox.KindConflict, "volume %q changed on another node meanwhile", name).WithHint("retry")
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "volume %q: the shared store: %v", name, err)
}

// createCluster is Create on a node of a cluster.
func (s *Store) createCluster(tenant, name string, quota int64) (sandbox.VolumeInfo, error) {
	c := s.opts.Cluster
	if n := len(s.listCluster(tenant)); n >= s.opts.MaxPerTenant {
		return sandbox.VolumeInfo{}, sandbox.Errorf(sandbox.KindConflict, "%d volumes exist, the most a tenant may have", n).
			WithHint("remove volumes you no longer need")
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	r := record{meta: meta{Name: name, Tenant: tenant, QuotaBytes: quota, CreatedAt: time.Now().UTC().Truncate(time.Second)}, ID: hex.EncodeToString(id[:])}
	data, _ := json.Marshal(r)
	ctx, cancel := cctx()
	defer cancel()
	if _, err := c.Records.Create(ctx, sharedstore.Record{Session: recordKey(tenant, name), Owner: c.Node, Addr: c.Addr, Data: data, Updated: time.Now().UTC()}); err != nil {
		if errors.Is(err, sharedstore.ErrExists) {
			return sandbox.VolumeInfo{}, sandbox.Errorf(sandbox.KindConflict, "volume %q exists", name).
				WithHint("use it, or remove it first (DELETE /v1/volumes/%s)", name)
		}
		return sandbox.VolumeInfo{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "volume %q: the shared store: %v", name, err)
	}
	// The local copy now, as a single daemon makes it (a failure here is made good at the
	// first attach).
	if err := s.syncLocal(r); err != nil {
		c.logger().Warn("volume: making the local copy", "volume", name, "err", err)
	}
	return s.infoCluster(r), nil
}

func (c *Cluster) logger() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

func (s *Store) infoCluster(r record) sandbox.VolumeInfo {
	v := s.info(r.meta)
	if r.Holder != "" {
		v.MountedRW = 1
	}
	if len(r.Readers) > v.MountedRO {
		v.MountedRO = len(r.Readers)
	}
	return v
}

// listCluster lists tenant's volumes from the shared store.
func (s *Store) listCluster(tenant string) []sandbox.VolumeInfo {
	ctx, cancel := cctx()
	defer cancel()
	recs, err := s.opts.Cluster.Records.List(ctx)
	out := []sandbox.VolumeInfo{}
	if err != nil {
		s.opts.Cluster.logger().Warn("volumes: listing the shared store", "err", err)
		return out
	}
	for _, rec := range recs {
		var r record
		if json.Unmarshal(rec.Data, &r) == nil && r.Tenant == tenant && rec.Session == recordKey(tenant, r.Name) {
			out = append(out, s.infoCluster(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// syncLocal makes this node's copy of r hold r's content, unless a lease here holds it now.
// Called with s.mu held (or before the Store is shared).
func (s *Store) syncLocal(r record) error {
	dir := s.volDir(r.Tenant, r.Name)
	if s.leases[key{r.Tenant, r.Name}] != nil {
		return nil
	}
	var l local
	if b, err := os.ReadFile(filepath.Join(dir, "volume.json")); err == nil && json.Unmarshal(b, &l) == nil &&
		l.ID == r.ID && l.Content == r.Content && l.QuotaBytes == r.QuotaBytes && l.Tenant == r.Tenant {
		return nil
	}
	if mounted(filepath.Join(dir, "mnt")) {
		_ = unmount(filepath.Join(dir, "mnt"))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("volume %q: %w", r.Name, err)
	}
	if err := s.makeImage(dir, r.QuotaBytes); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("volume %q: %w", r.Name, err)
	}
	if r.Content != "" {
		if err := s.fill(dir, r.Content); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("volume %q: its files from the shared store: %w", r.Name, err)
		}
	}
	b, _ := json.Marshal(local{meta: r.meta, ID: r.ID, Content: r.Content})
	if err := writeAtomic(filepath.Join(dir, "volume.json"), b); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}

// fill extracts the content ref into the image in dir.
func (s *Store) fill(dir, ref string) error {
	snaps := s.opts.Cluster.Snapshots
	refs, _, err := snaps.Manifest(ref)
	if err != nil {
		return err
	}
	if len(refs) != 1 {
		return fmt.Errorf("content %s names %d blobs", ref[:12], len(refs))
	}
	tmp, err := os.MkdirTemp(snaps.TmpDir(), "volume-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tarPath := filepath.Join(tmp, "v.tar")
	if err := snaps.LinkBlob(refs[0], tarPath); err != nil {
		return err
	}
	mnt := filepath.Join(dir, "mnt")
	if err := mount(filepath.Join(dir, "volume.img"), mnt, false); err != nil {
		return err
	}
	err = dirtar.Extract(mnt, tarPath)
	if uerr := unmount(mnt); err == nil {
		err = uerr
	}
	return err
}

// storeContent writes the files under mnt into the snapshot store and returns the manifest.
func (s *Store) storeContent(mnt string) (string, error) {
	snaps := s.opts.Cluster.Snapshots
	f, err := os.CreateTemp(snaps.TmpDir(), "volume-*.tar")
	if err != nil {
		return "", err
	}
	_, err = dirtar.Write(mnt, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	d, _, err := snaps.PutFile(f.Name())
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	ref, _, err := snaps.PutManifest([]string{d}, []byte(contentKind))
	return ref, err
}

// setLocalContent notes that this node's copy of r holds content.
func (s *Store) setLocalContent(r record, content string) {
	b, _ := json.Marshal(local{meta: r.meta, ID: r.ID, Content: content})
	_ = writeAtomic(filepath.Join(s.volDir(r.Tenant, r.Name), "volume.json"), b)
}

// attachCluster is AttachFor on a node of a cluster. Called with s.mu held.
func (s *Store) attachCluster(session, tenant, name string, readOnly bool) (string, func(), error) {
	c := s.opts.Cluster
	rec, r, err := c.get(tenant, name)
	if err != nil {
		return "", nil, err
	}
	k := key{tenant, name}
	if readOnly {
		return s.attachReader(session, tenant, name, r)
	}
	if l := s.leases[k]; l != nil {
		// This node holds it already: the local rules say (one writer, or readers).
		return s.attachLocked(tenant, name, readOnly)
	}
	if r.Holder != "" && r.Holder != session && c.held(r) {
		what := "read-write"
		if readOnly {
			what = "read-only beside it"
		}
		return "", nil, sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted read-write by another session (on node %s); it cannot be mounted %s", name, rec.Owner, what).
			WithHint("a volume is mounted read-write by one session at a time: close that session, or wait")
	}
	if rs, n, ok := c.reader(r, session); ok {
		return "", nil, sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted read-only by session %s (on node %s); it cannot be mounted read-write as well", name, rs, n).
			WithHint("mount it read-only (\"/path:ro\"), or close the sessions that read it")
	}
	// A read-write lease: this node owns the record, the session holds it (a moved session
	// held it already: the claim alone moves its lease here, one conditional write).
	if rec, err = c.own(rec, name); err != nil {
		return "", nil, err
	}
	if r.Holder != session || len(r.Readers) > 0 {
		r.Holder, r.Readers = session, nil // the readers left are gone
		if rec, err = c.put(rec, r, name); err != nil {
			return "", nil, err
		}
	}
	giveBack := func() {
		r.Holder = ""
		if _, err := c.put(rec, r, name); err != nil {
			c.logger().Warn("volume: giving the lease back", "volume", name, "err", err)
		}
	}
	if err := s.syncLocal(r); err != nil {
		giveBack()
		return "", nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "%v", err)
	}
	mnt, release, err := s.attachLocked(tenant, name, false)
	if err != nil {
		giveBack()
		return "", nil, err
	}
	l := s.leases[k]
	l.onRelease = func() {
		// With s.mu held, the mount still there: its files become the volume's content.
		content, err := s.storeContent(mnt)
		if err != nil {
			c.logger().Warn("volume: storing its files at the lease's end", "volume", name, "err", err)
			l.err = sandbox.Errorf(sandbox.KindRuntimeUnavailable, "volume %q: storing its files: %v", name, err)
			content = r.Content
		}
		r.Holder, r.Content = "", content
		if _, err := c.put(rec, r, name); err != nil {
			c.logger().Warn("volume: the lease's end was not recorded", "volume", name, "err", err)
			l.err = err
			return
		}
		s.setLocalContent(r, content)
	}
	return mnt, release, nil
}

// contentKind is the body of a volume content's manifest (package heavy writes the same).
const contentKind = `{"kind":"volume-content/1"}`

// Checkpointed records the contents a durable snapshot of session holds of its read-write
// volumes (sandbox.VolumeContents): should the session end where nobody can give its files back
// (closed while asleep after its node died), its volumes keep those of its last durable step.
func (s *Store) Checkpointed(session, tenant string, contents map[string]string) {
	c := s.opts.Cluster
	if c == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, content := range contents {
		rec, r, err := c.get(tenant, name)
		if err != nil || r.Holder != session || rec.Owner != c.Node || content == "" {
			continue
		}
		r.Content = content
		if _, err := c.put(rec, r, name); err != nil {
			c.logger().Warn("volume: recording its content of a durable step", "volume", name, "err", err)
		}
	}
}

// attachReader is a read-only lease of session on a node of a cluster: its reader entry in the
// record (so a writer on any node meets it), and this node's copy of the latest content mounted
// read-only. Called with s.mu held.
func (s *Store) attachReader(session, tenant, name string, r record) (string, func(), error) {
	c := s.opts.Cluster
	if s.leases[key{tenant, name}] == nil {
		if r.Holder != "" && r.Holder != session && c.held(r) {
			return "", nil, sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted read-write by another session; it cannot be mounted read-only beside it", name).
				WithHint("a volume is mounted read-write by one session at a time: close that session, or wait")
		}
		if err := s.syncLocal(r); err != nil {
			return "", nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "%v", err)
		}
	}
	mnt, release, err := s.attachLocked(tenant, name, true)
	if err != nil || session == "" {
		return mnt, release, err
	}
	if err := c.setReader(tenant, name, session, true); err != nil {
		release()
		return "", nil, err
	}
	return mnt, func() {
		release()
		if err := c.setReader(tenant, name, session, false); err != nil {
			c.logger().Warn("volume: the reader's end was not recorded", "volume", name, "err", err)
		}
	}, nil
}

// dropDeleted removes this node's copies of volumes the cluster no longer has (deleted on
// another node, perhaps made again since: another id).
func (s *Store) dropDeleted() {
	metas, _ := filepath.Glob(filepath.Join(s.dir, "*", "*", "volume.json"))
	for _, p := range metas {
		var l local
		if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &l) != nil {
			continue
		}
		_, r, err := s.opts.Cluster.get(l.Tenant, l.Name)
		if sandbox.KindOf(err) == sandbox.KindNotFound || err == nil && r.ID != l.ID {
			_ = os.RemoveAll(filepath.Dir(p))
		}
	}
}
