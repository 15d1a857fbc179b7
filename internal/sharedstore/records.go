package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Record is a session's record in the shared store.
type Record struct {
	// Session is the session's id.
	Session string `json:"session"`
	// Owner is the node that owns the session at Epoch; Addr is the base URL it advertised.
	Owner string `json:"owner"`
	Addr  string `json:"addr,omitempty"`
	// Epoch grows by one with every change of owner: the fencing token of Put and Delete.
	Epoch uint64 `json:"epoch"`
	// Released says the owner gave the session up (a drain): any node may claim it without
	// asking whether the owner is gone.
	Released bool `json:"released,omitempty"`
	// Closed marks a tombstone: Delete writes one at the next epoch, the way a claim takes it,
	// so that of a close and a claim at once exactly one wins (a claim meeting it finds the
	// session gone; a close meeting a claim is fenced). Readers never see one: the session has
	// no record.
	Closed bool `json:"closed,omitempty"`
	// Refs are the snapshot references the session holds: roots of the shared store's garbage
	// collection, whichever node runs it.
	Refs []string `json:"refs,omitempty"`
	// Data is the owner's description of the session (the Manager's record), opaque here.
	Data    json.RawMessage `json:"data,omitempty"`
	Updated time.Time       `json:"updated"`
}

// Records keeps sessions' records with fenced ownership. Implementations are safe for concurrent
// use by many processes on many machines.
type Records interface {
	// Create writes the first record of a new session, at epoch 1 (rec.Epoch is ignored).
	// ErrExists when the session has a record.
	Create(ctx context.Context, rec Record) (Record, error)
	// Get returns the session's current record (its latest epoch). ErrNotFound when it has none.
	Get(ctx context.Context, session string) (Record, error)
	// Put rewrites the session's record at rec.Epoch, by its owner rec.Owner. A *FencedError
	// (errors.Is ErrFenced) when the session is owned at another epoch or by another node now,
	// ErrNotFound when it was deleted.
	Put(ctx context.Context, rec Record) error
	// Claim makes node (at addr) the session's owner at epoch from+1, keeping the record's data
	// and refs. Of concurrent claims from the same epoch exactly one wins; the others get a
	// *FencedError naming the winner's record. Claiming from an epoch that is no longer the
	// latest is fenced too.
	Claim(ctx context.Context, session string, from uint64, node, addr string) (Record, error)
	// Delete removes the session's records, by its owner at epoch. A *FencedError when the
	// session is owned at another epoch now.
	Delete(ctx context.Context, session string, epoch uint64) error
	// List returns the current record of every session.
	List(ctx context.Context) ([]Record, error)
}

// Errors of Records.
var (
	ErrNotFound = errors.New("sharedstore: no record of that session")
	ErrExists   = errors.New("sharedstore: the session has a record already")
	ErrFenced   = errors.New("sharedstore: the session is owned at a later epoch")
)

// FencedError says a write lost to the session's current owner.
type FencedError struct {
	// Current is the session's record as it is now.
	Current Record
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("sharedstore: session %s is owned by node %s at epoch %d", e.Current.Session, e.Current.Owner, e.Current.Epoch)
}

// Is makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Current returns the record a fenced error names, and whether err is one.
func Current(err error) (Record, bool) {
	var f *FencedError
	if errors.As(err, &f) {
		return f.Current, true
	}
	return Record{}, false
}

// Store is the storage every node of a cluster sees: the sessions' records and the snapshot
// store their references name. Dir (a directory every node mounts) and S3 (a bucket of an
// S3-compatible server) implement it.
type Store interface {
	Records
	// Snapshots is the snapshot store every node writes its sessions' durable snapshots into
	// and restores them from.
	Snapshots() *snapstore.Store
	// Collect removes every snapshot that neither roots (the calling node's own) nor any
	// session's record refers to (sandbox.SnapshotCollector).
	Collect(roots []string) error
}

// roots are the snapshot references every session's record holds, on whichever node.
func roots(ctx context.Context, r Records) ([]string, error) {
	recs, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rec := range recs {
		out = append(out, rec.Refs...)
	}
	return out, nil
}

// collect is Collect over any Records: a node's collection never takes what another node's
// sessions need. Snapshots written lately are kept (snapstore.GC), which covers one being
// written on another node whose record does not name it yet.
func collect(r Records, snaps *snapstore.Store, mine []string, more ...Records) error {
	all, err := roots(context.Background(), r)
	if err != nil {
		return err
	}
	for _, m := range more { // the volumes' contents
		rs, err := roots(context.Background(), m)
		if err != nil {
			return err
		}
		all = append(all, rs...)
	}
	_, err = snaps.GC(append(all, mine...))
	return err
}
