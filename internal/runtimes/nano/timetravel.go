package nano

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Time travel in nano (sandbox.Snapshotter, Pauser, Restorer).
//
// A step's snapshot is the parked interpreter's state as engine.Snapshot takes it (the 4 KiB
// pages of linear memory that differ from a pristine interpreter, the private files, the clock),
// taken by the session's worker right behind the run's result, before it reads another request,
// and sent unasked as a delta from the one before (wire.Request.SnapStep, OpStepSnapshot): the
// Manager's Snapshot only records it, and the daemon makes it into pages (shared with the step
// before, see snap) when Persist, a rewind the worker cannot serve or a fork needs them. The
// worker keeps its last few steps, the daemon the latest few, for rewinds and forks that need
// no disk.
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
	// cur is the session's state at its last step or rewind: the session comes back to it when
	// its worker is lost.
	cur *snap
	// parts are recent steps' snapshots, order their steps oldest first.
	parts map[string]*snap
	order []string
	// refs are steps' durable references.
	refs map[string]string
	// pages is the page table of the session's last durable snapshot: a page's hash to where
	// it is stored, for Persist to store only new pages.
	pages map[[32]byte]pageLoc
	// hashes are the hashes of the last durable snapshot's pages, by page: the next one shares
	// most of its pages (engine.SnapshotParts), and only its new pages are hashed.
	hashes map[*byte][32]byte
	// paused is the durable reference of a paused session's state, loaded at its next run.
	paused string
	// base is the snapshot the session's worker sent last, the base of its next delta; nil when
	// the worker's interpreter was restored from elsewhere since (or the worker changed).
	base *snap
	// ask: every run asks its worker for the step's snapshot (wire.Request.SnapStep), set by
	// the first Snapshot (the Manager takes one after every run; a session it does not take
	// them for never asks). last is the one the last run asked for, for the Snapshot that
	// follows it; seq names them in the worker.
	ask  bool
	last *snap
	seq  int
	// rewinding is a rewind sent to the worker and not answered yet (settle).
	rewinding *rewinding
}

// snap is a step's snapshot as the daemon holds it: its parts, or the delta its worker sent
// (or is sending) for it and the snapshot that delta is relative to, made into parts the first
// time they are needed (Persist, a rewind the worker cannot serve, a fork), off the critical
// path: a step's snapshot costs the run that follows it no copy of its pages in the daemon.
type snap struct {
	// key names it in the worker p, which keeps its last few (worker.keepSteps) for rewinds
	// in place; p is nil when no worker was given it. Guarded by session.mu.
	key string
	p   *proc

	// sent is the frame the snapshot came in, if any (frame until made into parts); ok says
	// its parts are made. For taken, without mu.
	sent *snapFrame
	ok   atomic.Bool

	mu    sync.Mutex
	frame *snapFrame // the delta, until made into parts
	base  *snap      // what the delta is relative to, until made into parts
	parts *engine.SnapshotParts
	err   error
	took  time.Duration // how long the worker took to take it after the run's result
}

// taken says the snapshot's state is in the daemon's hands, or on its way: its parts, or its
// worker's frame delivered without an error. It does not wait, nor take x.mu (a Persist may be
// making the frame into parts). A delta relative to the snapshot before is sent only over a
// base the worker took without an error, so a frame delivered whole can be made into parts.
func (x *snap) taken() bool {
	return x.ok.Load() || x.sent != nil && x.sent.ok.Load()
}

// snapOf is a snapshot already in parts.
func snapOf(parts *engine.SnapshotParts) *snap {
	x := &snap{parts: parts}
	x.ok.Store(true)
	return x
}

// get returns the snapshot's parts, made from the worker's delta and its base the first time.
func (x *snap) get(ctx context.Context) (*engine.SnapshotParts, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: no snapshot", errNotTaken)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.parts != nil || x.err != nil {
		return x.parts, x.err
	}
	d, err := x.frame.wait(ctx, x.p)
	if err != nil {
		if ctx.Err() == nil {
			x.err = err
		}
		return nil, err
	}
	x.took = x.frame.took
	var base *engine.SnapshotParts
	if d.Relative {
		if base, err = x.base.get(ctx); err != nil {
			if ctx.Err() == nil {
				x.err = fmt.Errorf("%w: its base: %w", errNotTaken, err)
			}
			return nil, err
		}
	}
	parts, err := d.Apply(base)
	if err != nil {
		x.err = fmt.Errorf("%w: %w", errNotTaken, err)
		return nil, x.err
	}
	// The base and the delta are not needed any more: older snapshots can go.
	x.parts, x.frame, x.base = parts, nil, nil
	x.ok.Store(true)
	return parts, nil
}

// errNotTaken says a step's snapshot was never taken (the worker could not, or died first).
var errNotTaken = sandbox.ErrSnapshotNotTaken

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

func (t *travel) remember(step string, x *snap) {
	if t.parts == nil {
		t.parts = map[string]*snap{}
	}
	t.parts[step] = x
	// Most recently used last: a step rewound to stays in memory.
	t.order = append(slices.DeleteFunc(t.order, func(s string) bool { return s == step }), step)
	t.cur = x
	// Drop the oldest in-memory snapshots that are durable.
	for len(t.order) > keepInMemory {
		old := t.order[0]
		if t.refs[old] == "" {
			break
		}
		delete(t.parts, old)
		t.order = t.order[1:]
	}
}

// curBlob is the session's current state as a blob for a restore; nil when it has none.
func (t *travel) curBlob() []byte {
	if t.cur == nil {
		return nil
	}
	parts, err := t.cur.get(context.Background())
	if err != nil {
		return nil
	}
	b, err := engine.EncodeSnapshot(parts)
	if err != nil {
		return nil
	}
	return b
}

// asking returns what a run asks its worker for its step's snapshot, nil when the session does
// not take them. Called with s.mu, after the run's restore is decided.
func (s *session) asking(restore []byte) *stepAsk {
	if !s.tt.ask {
		return nil
	}
	s.tt.seq++
	return &stepAsk{key: "run-" + strconv.Itoa(s.tt.seq), base: s.tt.base != nil && restore == nil}
}

// asked records the snapshot a run asked for, once its worker answered the run and lives on:
// the frame follows the result. Called with s.mu.
func (s *session) asked(a *stepAsk) {
	s.tt.last = nil
	if a == nil || a.frame == nil || s.p == nil || !s.p.alive() {
		return
	}
	x := &snap{key: a.key, p: s.p, frame: a.frame, sent: a.frame}
	if a.base {
		x.base = s.tt.base
	}
	s.tt.base, s.tt.last = x, x
}

// Snapshot takes the session's state after its last run into memory. The run asked its worker
// for it (the worker takes it right after the result and before it reads anything more, so
// nothing changes the state in between): it is recorded here, and made into parts in the
// daemon later, for Persist. The first step's is asked for on its own.
func (s *session) Snapshot(ctx context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var x *snap
	if err := s.settle(ctx); err != nil {
		return err
	}
	switch {
	case s.closed:
		return sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	case s.p != nil && s.p.alive() && s.tt.last != nil && s.tt.last.p == s.p:
		x, s.tt.last = s.tt.last, nil
	case s.p != nil && s.p.alive():
		s.tt.ask = true
		var base *engine.SnapshotParts
		if s.tt.base != nil {
			var err error
			if base, err = s.tt.base.get(ctx); err != nil {
				s.tt.base = nil
			}
		}
		d, err := s.p.snapshot(ctx, step, base != nil)
		var parts *engine.SnapshotParts
		if err == nil {
			parts, err = d.Apply(base)
		}
		if err != nil {
			s.tt.base = nil
			return err
		}
		x = &snap{key: step, p: s.p, parts: parts}
		x.ok.Store(true)
		s.tt.base = x
	case s.snap != nil:
		// Hibernated (its worker lost in the run): the state is the one before.
		p, err := engine.DecodeSnapshot(s.snap)
		if err != nil {
			return err
		}
		x = snapOf(p)
	default:
		return sandbox.Errorf(sandbox.KindConflict, "the session holds no interpreter to take a snapshot of")
	}
	s.tt.remember(step, x)
	return nil
}

// Persist makes step's snapshot durable.
func (s *session) Persist(ctx context.Context, step string) (sandbox.SnapshotRef, error) {
	st := s.r.opts.Snapshots
	s.mu.Lock()
	x := s.tt.parts[step]
	pages, hashes := s.tt.pages, s.tt.hashes
	s.mu.Unlock()
	if x == nil {
		return sandbox.SnapshotRef{}, fmt.Errorf("step %s has no snapshot in memory", step)
	}
	var ref sandbox.SnapshotRef
	var table map[[32]byte]pageLoc
	var err error
	lowPriority(func() {
		// Made into parts even without a store: a delta holds its base until then. Not under
		// ctx: a pause cancels it to hurry the session's persists (and a later persist may get
		// it still cancelled), but the worker's frame is on its way right behind the run's
		// result, or the worker is gone; the bound only catches a worker that hangs.
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var parts *engine.SnapshotParts
		if parts, err = x.get(wctx); err == nil && st != nil {
			ref, table, hashes, err = s.r.persist(parts, pages, s.secrets, hashes)
		}
	})
	ref.Took = x.took
	if err != nil || st == nil {
		return ref, err
	}
	s.mu.Lock()
	if s.tt.refs == nil {
		s.tt.refs = map[string]string{}
	}
	s.tt.refs[step] = ref.Ref
	s.tt.pages, s.tt.hashes = table, hashes
	s.mu.Unlock()
	return ref, nil
}

// persist writes a snapshot to the store, reusing the pages of prev. hashes are the known
// hashes of pages (pages are never written once in a snapshot); it returns those of parts.
func (r *Runtime) persist(parts *engine.SnapshotParts, prev map[[32]byte]pageLoc, secrets [][]byte, hashes map[*byte][32]byte) (sandbox.SnapshotRef, map[[32]byte]pageLoc, map[*byte][32]byte, error) {
	st := r.opts.Snapshots
	parts = scrubbed(parts, secrets)
	end := st.Begin()
	defer end()
	var added int64
	body := manifestBody{Build: parts.Build, Size: parts.Size, Clock: parts.Clock}
	packIdx := map[string]uint32{}
	table := make(map[[32]byte]pageLoc, len(parts.Offsets))
	var fresh bytes.Buffer
	var freshPages [][32]byte
	var pending []int // indexes into body.Pages that point into the new pack
	known := make(map[*byte][32]byte, len(parts.Pages))
	for k, off := range parts.Offsets {
		page := parts.Pages[k]
		h, ok := hashes[&page[0]]
		if !ok {
			h = hashPage(page)
		}
		known[&page[0]] = h
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
			return sandbox.SnapshotRef{}, nil, nil, err
		}
		d, n, err := st.Put(packed)
		if err != nil {
			return sandbox.SnapshotRef{}, nil, nil, err
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
				return sandbox.SnapshotRef{}, nil, nil, err
			}
			added += n
			mf.Blob, mf.Data = d, nil
			refs = append(refs, d)
		}
		body.Files = append(body.Files, mf)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return sandbox.SnapshotRef{}, nil, nil, err
	}
	ref, n, err := st.PutManifest(refs, b)
	if err != nil {
		return sandbox.SnapshotRef{}, nil, nil, err
	}
	return sandbox.SnapshotRef{Ref: ref, Bytes: added + n}, table, known, nil
}

// load reads a durable snapshot back, and its page table.
func (r *Runtime) load(ref string) (*engine.SnapshotParts, map[[32]byte]pageLoc, error) {
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
		Offsets: make([]uint32, 0, len(body.Pages)), Pages: make([][]byte, 0, len(body.Pages))}
	table := make(map[[32]byte]pageLoc, len(body.Pages))
	for _, p := range body.Pages {
		off, pi, idx := p[0], p[1], int(p[2])
		if int(pi) >= len(packs) || (idx+1)*engine.SnapshotPage > len(packs[pi]) {
			return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot %s is malformed", short(ref))
		}
		page := packs[pi][idx*engine.SnapshotPage : (idx+1)*engine.SnapshotPage : (idx+1)*engine.SnapshotPage]
		parts.Offsets = append(parts.Offsets, off)
		parts.Pages = append(parts.Pages, page)
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
	return parts, table, nil
}

// stepSnap returns a step's snapshot from memory, or from the store by ref. Called with s.mu.
func (s *session) stepSnap(step, ref string) (*snap, map[[32]byte]pageLoc, error) {
	if x := s.tt.parts[step]; x != nil {
		return x, s.tt.pages, nil
	}
	if ref == "" {
		ref = s.tt.refs[step]
	}
	if ref == "" {
		return nil, nil, sandbox.Errorf(sandbox.KindConflict, "the snapshot of step %s is no longer kept", step)
	}
	parts, pages, err := s.r.load(ref)
	if err != nil {
		return nil, nil, err
	}
	return snapOf(parts), pages, nil
}

// Rewind makes the session's state step's: in its worker at once (from the snapshots the worker
// kept, or sent there), or at its next run when it holds none. A rewind to a step the worker
// keeps is sent and not waited for: the worker serves its requests in order, so nothing the
// session does next sees the state before it, and its answer is read before the session's next
// use of the worker (settle), which makes the rewind another way if the worker could not.
func (s *session) Rewind(ctx context.Context, step, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	if err := s.settle(ctx); err != nil {
		return err
	}
	x, pages, err := s.stepSnap(step, ref)
	if err != nil {
		return err
	}
	if s.tt.pages == nil {
		s.tt.pages = pages
	}
	s.tt.paused, s.tt.last = "", nil
	if s.p != nil && s.p.alive() && x.p == s.p && x.key != "" {
		if x.taken() {
			// The daemon holds the state too, should the worker fail it: not waited for.
			if err := s.p.post(ctx, &wire.Request{Op: wire.OpRestore, Step: x.key}); err == nil {
				s.tt.rewinding = &rewinding{step: step, x: x, p: s.p}
				s.tt.remember(step, x)
				s.tt.base = x
				return nil
			}
		} else {
			// The worker's own copy of the step: nothing is sent, and nothing waits for the
			// daemon's copy.
			err := s.p.restore(ctx, x.key, nil)
			if err == nil {
				s.tt.remember(step, x)
				s.tt.base = x
				return nil
			}
			if ctx.Err() != nil {
				return err
			}
			return s.rewindAnew(ctx, step, x, err)
		}
	}
	return s.rewindAnew(ctx, step, x, sandbox.Errorf(sandbox.KindNotFound, "not in the worker"))
}

// rewinding is a rewind in place sent to the session's worker p and not answered yet.
type rewinding struct {
	step string
	x    *snap
	p    *proc
}

// settle reads the answer of the session's rewind in place, if one is on its way, before the
// session uses its worker again; a rewind the worker failed is made anew from the daemon's
// copy of the step (Rewind checked that it has it). Called with s.mu.
func (s *session) settle(ctx context.Context) error {
	rw := s.tt.rewinding
	if rw == nil {
		return nil
	}
	s.tt.rewinding = nil
	if rw.p != s.p {
		return nil // the worker went (closed, lost): the session restores cur, the step's, anew
	}
	err := rw.p.settle(ctx)
	if err == nil {
		return nil
	}
	// The rewind was answered already: it is made, whatever the caller's ctx.
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.rewindAnew(wctx, rw.step, rw.x, err); err != nil {
		return sandbox.Errorf(sandbox.KindInternal, "the session's rewind to step %s could not be made: %v", rw.step, err).
			WithHint("rewind to the step again, or to another")
	}
	return nil
}

// rewindAnew makes the session's state x's (step's) when its worker's own copy could not serve
// (why): x is sent to the worker when the worker just did not keep the step, else the session
// goes to the step at its next run, in another worker. Called with s.mu.
func (s *session) rewindAnew(ctx context.Context, step string, x *snap, why error) error {
	if s.p != nil && s.p.alive() {
		err := why
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			var parts *engine.SnapshotParts
			if parts, err = x.get(ctx); err == nil {
				var blob []byte
				if blob, err = engine.EncodeSnapshot(parts); err == nil {
					if err = s.p.restore(ctx, step, blob); err == nil {
						x.key, x.p = step, s.p
					}
				}
			}
		}
		if err == nil {
			s.tt.remember(step, x)
			s.tt.base = x
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		// The worker could not take it: the session restores at its next run, in another.
		s.p.kill()
		s.p = nil
	} else if s.p != nil {
		s.p.kill()
		s.p = nil
	}
	s.tt.base = nil
	parts, err := x.get(ctx)
	if err != nil {
		return err
	}
	blob, err := engine.EncodeSnapshot(parts)
	if err != nil {
		return err
	}
	s.tt.remember(step, x)
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
	x, pages, err := s.stepSnap(step, ref)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	parts, err := x.get(ctx)
	if err != nil {
		return nil, err
	}
	// The fork's memory may hold the parent's secrets as well as its own.
	return s.r.hibernatedSession(parts, pages, append(sandbox.SecretsOf(opts.Env), s.secrets...))
}

// hibernatedSession is a new session whose first run restores parts.
func (r *Runtime) hibernatedSession(parts *engine.SnapshotParts, pages map[[32]byte]pageLoc, secrets [][]byte) (*session, error) {
	blob, err := engine.EncodeSnapshot(parts)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the nano runtime is shut down")
	}
	n := &session{r: r, snap: blob, runs: 1, warm: true, secrets: secrets}
	n.tt.cur, n.tt.pages = snapOf(parts), pages
	r.hib.hibernated(len(blob))
	return n, nil
}

// Forget drops step's snapshot from memory.
func (s *session) Forget(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tt.parts, step)
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
	if err := s.settle(ctx); err != nil {
		return sandbox.SnapshotRef{}, err
	}
	var parts *engine.SnapshotParts
	if s.snap != nil {
		p, err := engine.DecodeSnapshot(s.snap)
		if err != nil {
			return sandbox.SnapshotRef{}, err
		}
		parts = p
	}
	if s.p != nil && s.p.alive() {
		b, err := s.p.hibernate(ctx)
		if err == nil {
			parts, err = engine.DecodeSnapshot(b)
		}
		if err != nil {
			return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict, "the session cannot pause: %v", err)
		}
		s.tt.base = nil
		if s.idle != nil {
			s.idle.Stop()
		}
		s.r.unhold(s)
		p := s.p
		s.p = nil
		s.r.wg.Add(1)
		s.r.comingBack()
		go func() {
			defer s.r.wg.Done()
			if waitParked(s.r.ctx, p) != nil {
				p.kill()
				p = nil
			}
			s.r.cameBack(p)
		}()
	} else if s.p != nil {
		s.p.kill()
		s.p = nil
	}
	if parts == nil && s.tt.cur != nil {
		var err error
		if parts, err = s.tt.cur.get(ctx); err != nil {
			return sandbox.SnapshotRef{}, err
		}
	}
	if parts == nil {
		// Never ran: nothing to keep; its next run starts it afresh.
		return sandbox.SnapshotRef{}, nil
	}
	ref, pages, hashes, err := s.r.persist(parts, s.tt.pages, s.secrets, s.tt.hashes)
	if err != nil {
		if s.snap == nil {
			if b, eerr := engine.EncodeSnapshot(parts); eerr == nil {
				s.snap = b // not paused, but hibernated: nothing is lost
				s.r.hib.hibernated(len(b))
			}
		}
		return sandbox.SnapshotRef{}, err
	}
	if s.snap != nil {
		s.r.hib.restored(len(s.snap))
	}
	s.snap = nil
	s.tt.paused, s.tt.pages, s.tt.hashes = ref.Ref, pages, hashes
	s.tt.cur, s.tt.parts, s.tt.order, s.tt.base, s.tt.last = nil, nil, nil, nil, nil
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
	p, _, done, err := s.r.sessionWorker(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := p.restore(ctx, "", s.snap); err != nil {
		p.kill()
		return err
	}
	s.tt.base = nil
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
	parts, pages, err := s.r.load(s.tt.paused)
	if err != nil {
		return err
	}
	blob, err := engine.EncodeSnapshot(parts)
	if err != nil {
		return err
	}
	s.snap, s.tt.cur, s.tt.pages, s.tt.paused = blob, snapOf(parts), pages, ""
	s.r.hib.hibernated(len(blob))
	return nil
}

// Restore makes a session from a durable snapshot reference, hibernated: its next run restores
// it into a worker.
func (r *Runtime) Restore(ctx context.Context, ref string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	parts, pages, err := r.load(ref)
	if err != nil {
		return nil, err
	}
	return r.hibernatedSession(parts, pages, sandbox.SecretsOf(opts.Env))
}

var pagePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// flateWriters keeps a few compressors for compress. A flate.Writer is ~1.1 MiB of tables
// (most of it the hash chains), allocated whole by flate.NewWriter: made anew for every step's
// pages it was most of what the daemon allocated per step, and under load the daemon's garbage
// collections slow the session's next runs (RATIONALE, "Where the rest of the critical path
// goes"). A channel rather than a sync.Pool: a pool is emptied by every second collection.
var flateWriters = make(chan *flate.Writer, 2)

func compress(b []byte) ([]byte, error) {
	buf := pagePool.Get().(*bytes.Buffer)
	defer pagePool.Put(buf)
	buf.Reset()
	var w *flate.Writer
	select {
	case w = <-flateWriters:
		w.Reset(buf) // as flate.NewWriter(buf, flate.BestSpeed) would make it
	default:
		var err error
		if w, err = flate.NewWriter(buf, flate.BestSpeed); err != nil {
			return nil, err
		}
	}
	defer func() {
		w.Reset(io.Discard) // holds no reference to buf
		select {
		case flateWriters <- w:
		default:
		}
	}()
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
