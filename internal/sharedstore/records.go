package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
