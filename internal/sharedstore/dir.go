package sharedstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Dir is the shared store in a directory every node mounts:
//
//	DIR/records/SESSION/EPOCH.json   a session's record at each epoch still kept (the latest wins)
//	DIR/records/tmp/                  records being written
//	DIR/snapshots/                    the snapshot store (package snapstore)
//
// A record appears whole or not at all: it is written to a temporary file and then linked
// (create-if-absent, for a new epoch) or renamed (a rewrite by the owner) into place. Nothing
// needs a lock held across processes, so a node killed at any point leaves the store usable.
type Dir struct {
	dir   string
	snaps *snapstore.Store
	ns    string // "records" (sessions), or "volumes" (Volumes)
}

// Interface guards.
var _ Store = (*Dir)(nil)

// OpenDir opens (creating) the shared store in dir.
func OpenDir(dir string) (*Dir, error) {
	if dir == "" {
		return nil, errors.New("sharedstore: no directory given")
	}
	if err := os.MkdirAll(filepath.Join(dir, "records", "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("sharedstore: %w", err)
	}
	snaps, err := snapstore.Open(filepath.Join(dir, "snapshots"))
	if err != nil {
		return nil, err
	}
	return &Dir{dir: dir, snaps: snaps, ns: "records"}, nil
}

// Volumes are the records of the cluster's volumes (package volumes), in DIR/volumes: the same
// fenced records as the sessions', beside them.
func (d *Dir) Volumes() Records {
	v := *d
	v.ns = "volumes"
	_ = os.MkdirAll(filepath.Join(d.dir, v.ns, "tmp"), 0o700)
	return &v
}

// Path is the store's directory.
func (d *Dir) Path() string { return d.dir }

// Snapshots is the snapshot store every node writes its sessions' durable snapshots into and
// restores them from.
func (d *Dir) Snapshots() *snapstore.Store { return d.snaps }

var sessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func (d *Dir) sessionDir(id string) (string, error) {
	if !sessionID.MatchString(id) || id == "tmp" {
		return "", fmt.Errorf("sharedstore: %q is not a session id", id)
	}
	return filepath.Join(d.dir, d.ns, id), nil
}

func epochName(e uint64) string { return fmt.Sprintf("%020d.json", e) }

// epochs lists the epochs a session has files for, oldest first.
func epochs(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(n, 10, 64); err == nil {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// latest reads the session's record at its latest epoch.
func (d *Dir) latest(id string) (Record, error) {
	sd, err := d.sessionDir(id)
	if err != nil {
		return Record{}, err
	}
	for range 3 { // a claim's cleanup may remove an old epoch between the listing and the read
		es, err := epochs(sd)
		if errors.Is(err, fs.ErrNotExist) || err == nil && len(es) == 0 {
			return Record{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return Record{}, fmt.Errorf("sharedstore: %w", err)
		}
		b, err := os.ReadFile(filepath.Join(sd, epochName(es[len(es)-1])))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Record{}, fmt.Errorf("sharedstore: %w", err)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return Record{}, fmt.Errorf("sharedstore: session %s's record: %w", id, err)
		}
		if r.Closed {
			return Record{}, fmt.Errorf("session %s (closed): %w", id, ErrNotFound)
		}
		return r, nil
	}
	return Record{}, fmt.Errorf("sharedstore: session %s's records kept changing under the read", id)
}

// stage writes rec to a temporary file and returns its path.
func (d *Dir) stage(rec Record) (string, error) {
	rec.Updated = time.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	var n [6]byte
	_, _ = rand.Read(n[:])
	tmp := filepath.Join(d.dir, d.ns, "tmp", rec.Session+"."+hex.EncodeToString(n[:]))
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", fmt.Errorf("sharedstore: %w", err)
	}
	return tmp, nil
}

// Create writes a new session's first record.
func (d *Dir) Create(_ context.Context, rec Record) (Record, error) {
	sd, err := d.sessionDir(rec.Session)
	if err != nil {
		return Record{}, err
	}
	if err := os.Mkdir(sd, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Record{}, fmt.Errorf("session %s: %w", rec.Session, ErrExists)
		}
		return Record{}, fmt.Errorf("sharedstore: %w", err)
	}
	rec.Epoch, rec.Released = 1, false
	tmp, err := d.stage(rec)
	if err != nil {
		return Record{}, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(sd, epochName(1))); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Record{}, fmt.Errorf("session %s: %w", rec.Session, ErrExists)
		}
		return Record{}, fmt.Errorf("sharedstore: %w", err)
	}
	return d.latest(rec.Session)
}

// Get returns the session's current record.
func (d *Dir) Get(_ context.Context, id string) (Record, error) { return d.latest(id) }

// Put rewrites the session's record at its epoch, if that is still the latest and rec.Owner
// owns it.
func (d *Dir) Put(_ context.Context, rec Record) error {
	cur, err := d.latest(rec.Session)
	if err != nil {
		return err
	}
	if cur.Epoch != rec.Epoch || cur.Owner != rec.Owner {
		return &FencedError{Current: cur}
	}
	sd, _ := d.sessionDir(rec.Session)
	tmp, err := d.stage(rec)
	if err != nil {
		return err
	}
	// A claim of the next epoch between the check above and this rename leaves this write at
	// the old epoch, under the new one: the new owner never reads it.
	if err := os.Rename(tmp, filepath.Join(sd, epochName(rec.Epoch))); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sharedstore: %w", err)
	}
	return nil
}

// Claim takes the session at epoch from+1 for node.
func (d *Dir) Claim(_ context.Context, id string, from uint64, node, addr string) (Record, error) {
	cur, err := d.latest(id)
	if err != nil {
		return Record{}, err
	}
	if cur.Epoch != from {
		return Record{}, &FencedError{Current: cur}
	}
	next := cur
	next.Owner, next.Addr, next.Epoch, next.Released = node, addr, from+1, false
	tmp, err := d.stage(next)
	if err != nil {
		return Record{}, err
	}
	defer os.Remove(tmp)
	sd, _ := d.sessionDir(id)
	if err := os.Link(tmp, filepath.Join(sd, epochName(from+1))); err != nil {
		if errors.Is(err, fs.ErrExist) {
			won, rerr := d.latest(id)
			if rerr != nil {
				return Record{}, rerr
			}
			return Record{}, &FencedError{Current: won}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return Record{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		return Record{}, fmt.Errorf("sharedstore: %w", err)
	}
	// Epochs before the one claimed from are no one's any more.
	if es, err := epochs(sd); err == nil {
		for _, e := range es {
			if e < from {
				os.Remove(filepath.Join(sd, epochName(e)))
			}
		}
	}
	return d.latest(id)
}

// Delete removes the session's records, if epoch is still its latest.
func (d *Dir) Delete(_ context.Context, id string, epoch uint64) error {
	cur, err := d.latest(id)
	if err != nil {
		return err
	}
	if cur.Epoch != epoch {
		return &FencedError{Current: cur}
	}
	sd, _ := d.sessionDir(id)
	// The next epoch's tombstone first, made as a claim's record is (link(2): one winner): a
	// claim from epoch under way now either won before it (the close is fenced) or loses to it
	// (and finds the session gone), never claims a session whose records are being removed.
	tomb := Record{Session: id, Owner: cur.Owner, Epoch: epoch + 1, Closed: true, Updated: time.Now().UTC()}
	tmp, err := d.stage(tomb)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(sd, epochName(epoch+1))); err != nil {
		if errors.Is(err, fs.ErrExist) {
			won, rerr := d.latest(id)
			if rerr != nil {
				return rerr
			}
			return &FencedError{Current: won}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		return fmt.Errorf("sharedstore: %w", err)
	}
	var n [6]byte
	_, _ = rand.Read(n[:])
	trash := filepath.Join(d.dir, d.ns, "tmp", "deleted-"+id+"-"+hex.EncodeToString(n[:]))
	if err := os.Rename(sd, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sharedstore: %w", err)
	}
	return os.RemoveAll(trash)
}

// List returns every session's current record. Sessions whose record cannot be read (deleted
// under the listing) are left out.
func (d *Dir) List(_ context.Context) ([]Record, error) {
	ents, err := os.ReadDir(filepath.Join(d.dir, d.ns))
	if err != nil {
		return nil, fmt.Errorf("sharedstore: %w", err)
	}
	var out []Record
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "tmp" {
			continue
		}
		if r, err := d.latest(e.Name()); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Roots are the snapshot references every session's record holds, on whichever node.
func (d *Dir) Roots(ctx context.Context) ([]string, error) { return roots(ctx, d) }

// Collect removes from the shared snapshot store every snapshot that neither roots (the calling
// node's own) nor any session's record refers to: a node's collection never takes what another
// node's sessions need. Snapshots written in the last minute are kept (snapstore.GC), which
// covers one being written on another node whose record does not name it yet.
func (d *Dir) Collect(roots []string) error { return collect(d, d.snaps, roots, d.Volumes()) }
