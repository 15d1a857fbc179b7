package nano

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Time travel in nano (sandbox.Snapshotter, Pauser, Restorer).
//
// A step's snapshot is the parked interpreter's state as engine.Snapshot takes it (the 4 KiB
// pages of linear memory that differ from a pristine interpreter, the private files, the clock),
// asked of the session's worker without taking the session out of it (wire.OpSnapshot). The
// session keeps the latest few in memory, for rewinds and forks that need no disk.
//
// Persist makes a step durable in the store: the pages are hashed, and only those the session's
// previous durable snapshot did not have go into a new pack (one flate stream per step); files
// are blobs of their own. The manifest (the snapshot's reference) lists, for every page, its
// offset and where it is (pack, index), and names the packs and file blobs it needs, so that the
// store's garbage collection keeps what a live step refers to. Ten steps that each change 1 MiB
// thus store about one full snapshot plus ten times 1 MiB, compressed.
//
// Rewind writes a step's state into the session's worker in place (wire.OpRestore: the
// interpreter is reset and restored), or, when the session holds no worker, keeps it for its
// next run, as a hibernated session's. Fork makes a new session that starts hibernated at the
// step. Pause hibernates the session, makes its state durable and drops it from memory: the
// worker goes back to the spares and the daemon holds nothing but the reference. Restore (after a
// restart) makes a session hibernated at a durable reference.

// keepInMemory is how many steps' snapshots a session keeps in the daemon's memory besides its
// current state; older ones are read back from the store.
const keepInMemory = 2

// travel is a session's time-travel state, guarded by session.mu.
type travel struct {
	// cur is the session's state at its last step or rewind, a snapshot blob: the session
	// comes back to it when its worker is lost.
	cur []byte
	// blobs are recent steps' snapshots, order their steps oldest first.
	blobs map[string][]byte
	order []string
	// refs are steps' durable references.
	refs map[string]string
	// pages is the page table of the session's last durable snapshot: a page's hash to where
	// it is stored, for Persist to store only new pages.
	pages map[[32]byte]pageLoc
	// paused is the durable reference of a paused session's state, loaded at its next run.
	paused string
}

type pageLoc struct {
	Pack  string
	Index int
}

// manifestBody is a durable snapshot's manifest body.
type manifestBody struct {
	Build [32]byte             `json:"build"`
	Size  int                  `json:"size"`
	Packs []string             `json:"packs"`
	Pages [][3]uint32          `json:"pages"` // offset, pack index, page index in the pack
	Files []manifestFile       `json:"files"`
	Clock engine.SnapshotClock `json:"clock"`
}

type manifestFile struct {
	engine.SnapshotFile
	Blob string `json:"blob,omitempty"`
}

func (t *travel) remember(step string, blob []byte) {
	if t.blobs == nil {
		t.blobs = map[string][]byte{}
	}
	t.blobs[step] = blob
	t.order = append(t.order, step)
	t.cur = blob
	// Drop the oldest in-memory snapshots that are durable.
	for len(t.order) > keepInMemory {
		old := t.order[0]
		if t.refs[old] == "" {
			break
		}
		delete(t.blobs, old)
		t.order = t.order[1:]
	}
}

// Snapshot takes the session's state after its last run into memory.
func (s *session) Snapshot(ctx context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var blob []byte
	switch {
	case s.closed:
		return sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	case s.p != nil && s.p.alive():
		b, err := s.p.snapshot(ctx)
		if err != nil {
			return err
		}
		blob = b
	case s.snap != nil:
		blob = s.snap // hibernated (its worker lost in the run): the state is the one before
	default:
		return sandbox.Errorf(sandbox.KindConflict, "the session holds no interpreter to take a snapshot of")
	}
	s.tt.remember(step, blob)
	return nil
}

// Persist makes step's snapshot durable.
func (s *session) Persist(ctx context.Context, step string) (sandbox.SnapshotRef, error) {
	st := s.r.opts.Snapshots
	if st == nil {
		return sandbox.SnapshotRef{}, nil
	}
	s.mu.Lock()
	blob := s.tt.blobs[step]
	pages := s.tt.pages
	s.mu.Unlock()
	if blob == nil {
		return sandbox.SnapshotRef{}, fmt.Errorf("step %s has no snapshot in memory", step)
	}
	ref, table, err := s.r.persist(blob, pages)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	s.mu.Lock()
	if s.tt.refs == nil {
		s.tt.refs = map[string]string{}
	}
	s.tt.refs[step] = ref.Ref
	s.tt.pages = table
	s.mu.Unlock()
	return ref, nil
}

// persist writes a snapshot blob to the store, reusing the pages of prev.
func (r *Runtime) persist(blob []byte, prev map[[32]byte]pageLoc) (sandbox.SnapshotRef, map[[32]byte]pageLoc, error) {
	st := r.opts.Snapshots
	parts, err := engine.DecodeSnapshot(blob)
	if err != nil {
		return sandbox.SnapshotRef{}, nil, err
	}
	end := st.Begin()
	defer end()
	var added int64
	body := manifestBody{Build: parts.Build, Size: parts.Size, Clock: parts.Clock}
	packIdx := map[string]uint32{}
	table := make(map[[32]byte]pageLoc, len(parts.Offsets))
	var fresh bytes.Buffer
	var freshPages [][32]byte
	var pending []int // indexes into body.Pages that point into the new pack
	for k, off := range parts.Offsets {
		page := parts.Data[k*engine.SnapshotPage : (k+1)*engine.SnapshotPage]
		h := hashPage(page)
		loc, ok := table[h]
		if !ok {
			loc, ok = prev[h]
		}
		if ok {
			pi, seen := packIdx[loc.Pack]
			if !seen {
				pi = uint32(len(body.Packs))
				body.Packs = append(body.Packs, loc.Pack)
				packIdx[loc.Pack] = pi
			}
			body.Pages = append(body.Pages, [3]uint32{off, pi, uint32(loc.Index)})
			table[h] = loc
			continue
		}
		idx := len(freshPages)
		freshPages = append(freshPages, h)
		fresh.Write(page)
		table[h] = pageLoc{Index: idx} // Pack set below
		pending = append(pending, len(body.Pages))
		body.Pages = append(body.Pages, [3]uint32{off, 0, uint32(idx)})
	}
	if len(freshPages) > 0 {
		packed, err := compress(fresh.Bytes())
		if err != nil {
			return sandbox.SnapshotRef{}, nil, err
		}
		d, n, err := st.Put(packed)
		if err != nil {
			return sandbox.SnapshotRef{}, nil, err
		}
		added += n
		pi, seen := packIdx[d]
		if !seen {
			pi = uint32(len(body.Packs))
			body.Packs = append(body.Packs, d)
		}
		for _, i := range pending {
			body.Pages[i][1] = pi
		}
		for _, h := range freshPages {
			loc := table[h]
			loc.Pack = d
			table[h] = loc
		}
	}
	refs := append([]string{}, body.Packs...)
	for _, f := range parts.Files {
		mf := manifestFile{SnapshotFile: f}
		if !f.Dir {
			d, n, err := st.Put(f.Data)
			if err != nil {
				return sandbox.SnapshotRef{}, nil, err
			}
			added += n
			mf.Blob, mf.Data = d, nil
			refs = append(refs, d)
		}
		body.Files = append(body.Files, mf)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return sandbox.SnapshotRef{}, nil, err
	}
	ref, n, err := st.PutManifest(refs, b)
	if err != nil {
		return sandbox.SnapshotRef{}, nil, err
	}
	return sandbox.SnapshotRef{Ref: ref, Bytes: added + n}, table, nil
}

// load reads a durable snapshot back into a blob for engine.Restore, and its page table.
func (r *Runtime) load(ref string) ([]byte, map[[32]byte]pageLoc, error) {
	st := r.opts.Snapshots
	if st == nil {
		return nil, nil, sandbox.Errorf(sandbox.KindConflict, "this daemon keeps no durable snapshots")
	}
	_, b, err := st.Manifest(ref)
	if err != nil {
		return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot %s cannot be read: %v", short(ref), err)
	}
	var body manifestBody
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, nil, fmt.Errorf("nano: snapshot %s: %w", short(ref), err)
	}
	packs := make([][]byte, len(body.Packs))
	for i, d := range body.Packs {
		c, err := st.Get(d)
		if err == nil {
			packs[i], err = decompress(c)
		}
		if err != nil {
			return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot %s cannot be read: %v", short(ref), err)
		}
	}
	parts := &engine.SnapshotParts{Build: body.Build, Size: body.Size, Clock: body.Clock,
		Offsets: make([]uint32, 0, len(body.Pages)), Data: make([]byte, 0, len(body.Pages)*engine.SnapshotPage)}
	table := make(map[[32]byte]pageLoc, len(body.Pages))
	for _, p := range body.Pages {
		off, pi, idx := p[0], p[1], int(p[2])
		if int(pi) >= len(packs) || (idx+1)*engine.SnapshotPage > len(packs[pi]) {
			return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot %s is malformed", short(ref))
		}
		page := packs[pi][idx*engine.SnapshotPage : (idx+1)*engine.SnapshotPage]
		parts.Offsets = append(parts.Offsets, off)
		parts.Data = append(parts.Data, page...)
		table[hashPage(page)] = pageLoc{Pack: body.Packs[pi], Index: idx}
	}
	for _, f := range body.Files {
		sf := f.SnapshotFile
		if f.Blob != "" {
			data, err := st.Get(f.Blob)
			if err != nil {
				return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot %s cannot be read: %v", short(ref), err)
			}
			sf.Data = data
		}
		parts.Files = append(parts.Files, sf)
	}
	blob, err := engine.EncodeSnapshot(parts)
	return blob, table, err
}

// stepBlob returns a step's snapshot from memory, or from the store by ref. Called with s.mu.
func (s *session) stepBlob(step, ref string) ([]byte, map[[32]byte]pageLoc, error) {
	if b := s.tt.blobs[step]; b != nil {
		return b, s.tt.pages, nil
	}
	if ref == "" {
		ref = s.tt.refs[step]
	}
	if ref == "" {
		return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot of step %s is no longer kept", step)
	}
	return s.r.load(ref)
}

// Rewind makes the session's state step's.
func (s *session) Rewind(ctx context.Context, step, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	blob, pages, err := s.stepBlob(step, ref)
	if err != nil {
		return err
	}
	if s.tt.pages == nil {
		s.tt.pages = pages
	}
	s.tt.cur, s.tt.paused = blob, ""
	if s.p != nil && s.p.alive() {
		if err := s.p.restore(ctx, blob); err == nil {
			return nil
		}
		// The worker could not take it: the session restores at its next run, in another.
		s.p.kill()
		s.p = nil
	}
	if s.snap != nil {
		s.r.hib.restored(len(s.snap))
	}
	s.snap = blob
	s.r.hib.hibernated(len(blob))
	return nil
}

// Fork starts a new session, hibernated at step's state.
func (s *session) Fork(ctx context.Context, step, ref string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s.mu.Lock()
	blob, pages, err := s.stepBlob(step, ref)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.r.hibernatedSession(blob, pages)
}

// hibernatedSession is a new session whose first run restores blob.
func (r *Runtime) hibernatedSession(blob []byte, pages map[[32]byte]pageLoc) (*session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the nano runtime is shut down")
	}
	n := &session{r: r, snap: blob, runs: 1, warm: true}
	n.tt.cur, n.tt.pages = blob, pages
	r.hib.hibernated(len(blob))
	return n, nil
}

// Forget drops step's snapshot from memory.
func (s *session) Forget(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tt.blobs, step)
	delete(s.tt.refs, step)
	for i, id := range s.tt.order {
		if id == step {
			s.tt.order = append(s.tt.order[:i], s.tt.order[i+1:]...)
			break
		}
	}
}

// Pause makes the session's state durable and frees its worker and its memory.
func (s *session) Pause(ctx context.Context) (sandbox.SnapshotRef, error) {
	if s.r.opts.Snapshots == nil {
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict, "this daemon keeps no durable snapshots, so sessions cannot pause").
			WithHint("run the daemon with a data directory")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	if s.tt.paused != "" {
		return sandbox.SnapshotRef{Ref: s.tt.paused}, nil
	}
	blob := s.snap
	if s.p != nil && s.p.alive() {
		b, err := s.p.hibernate(ctx)
		if err != nil {
			return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict, "the session cannot pause: %v", err)
		}
		blob = b
		if s.idle != nil {
			s.idle.Stop()
		}
		s.r.unhold(s)
		p := s.p
		s.p = nil
		s.r.wg.Add(1)
		go func() {
			defer s.r.wg.Done()
			if waitParked(s.r.ctx, p) == nil {
				s.r.addSpare(p)
			} else {
				p.kill()
			}
		}()
	} else if s.p != nil {
		s.p.kill()
		s.p = nil
	}
	if blob == nil {
		blob = s.tt.cur
	}
	if blob == nil {
		// Never ran: nothing to keep; its next run starts it afresh.
		return sandbox.SnapshotRef{}, nil
	}
	ref, pages, err := s.r.persist(blob, s.tt.pages)
	if err != nil {
		s.snap = blob // not paused, but hibernated: nothing is lost
		s.r.hib.hibernated(len(blob))
		return sandbox.SnapshotRef{}, err
	}
	if s.snap != nil {
		s.r.hib.restored(len(s.snap))
	}
	s.snap = nil
	s.tt.paused, s.tt.pages = ref.Ref, pages
	s.tt.cur, s.tt.blobs, s.tt.order = nil, nil, nil
	return ref, nil
}

// Resume loads a paused session's state and restores it into a worker.
func (s *session) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unpause(); err != nil {
		return err
	}
	if s.p != nil || s.snap == nil {
		return nil
	}
	p, _, err := s.r.sessionWorker(ctx)
	if err != nil {
		return err
	}
	if err := p.restore(ctx, s.snap); err != nil {
		p.kill()
		return err
	}
	s.r.hib.restored(len(s.snap))
	s.p, s.snap = p, nil
	s.r.hold(s)
	if d := s.r.opts.HibernateAfter; d > 0 {
		s.idle = time.AfterFunc(d, s.hibernateIdle)
	}
	return nil
}

// unpause reads a paused session's state back into memory, hibernated. Called with s.mu.
func (s *session) unpause() error {
	if s.tt.paused == "" {
		return nil
	}
	blob, pages, err := s.r.load(s.tt.paused)
	if err != nil {
		return err
	}
	s.snap, s.tt.cur, s.tt.pages, s.tt.paused = blob, blob, pages, ""
	s.r.hib.hibernated(len(blob))
	return nil
}

// Restore makes a session from a durable snapshot reference, hibernated: its next run restores
// it into a worker.
func (r *Runtime) Restore(ctx context.Context, ref string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	blob, pages, err := r.load(ref)
	if err != nil {
		return nil, err
	}
	return r.hibernatedSession(blob, pages)
}

var pagePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func compress(b []byte) ([]byte, error) {
	buf := pagePool.Get().(*bytes.Buffer)
	defer pagePool.Put(buf)
	buf.Reset()
	w, err := flate.NewWriter(buf, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

func decompress(b []byte) ([]byte, error) {
	return io.ReadAll(flate.NewReader(bytes.NewReader(b)))
}

func short(ref string) string {
	if len(ref) > 12 {
		return ref[:12]
	}
	return ref
}

func hashPage(p []byte) [32]byte { return sha256.Sum256(p) }
