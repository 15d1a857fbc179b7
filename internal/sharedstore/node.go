package sharedstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// NodeRecords is one node's view of the shared records: the Manager's sandbox.SessionRecords,
// writing each session's record at the epoch this node owns it at. It remembers those epochs; a
// write a later epoch fenced off is sandbox.ErrMoved, and the Manager lets the session go.
type NodeRecords struct {
	store Records
	node  string
	addr  string
	// timeout bounds one call to the store.
	timeout time.Duration

	mu     sync.Mutex
	epochs map[string]uint64
}

// Interface guards.
var _ sandbox.SessionRecords = (*NodeRecords)(nil)

// NewNodeRecords is node's view of store; addr is the base URL the node advertises (written
// into its records, for the node that finds one).
func NewNodeRecords(store Records, node, addr string) *NodeRecords {
	return &NodeRecords{store: store, node: node, addr: addr, timeout: 30 * time.Second, epochs: map[string]uint64{}}
}

// Node is the node's id.
func (n *NodeRecords) Node() string { return n.node }

// Addr is the node's advertised base URL.
func (n *NodeRecords) Addr() string { return n.addr }

// SetAddr sets the advertised URL once the node knows it (it listens after the Manager starts).
func (n *NodeRecords) SetAddr(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addr = addr
}

func (n *NodeRecords) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), n.timeout)
}

func (n *NodeRecords) epoch(id string) (uint64, string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.epochs[id]
	return e, n.addr, ok
}

func (n *NodeRecords) setEpoch(id string, e uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e == 0 {
		delete(n.epochs, id)
	} else {
		n.epochs[id] = e
	}
}

func moved(id string, err error) error {
	if cur, ok := Current(err); ok {
		return fmt.Errorf("session %s is node %s's now (epoch %d): %w", id, cur.Owner, cur.Epoch, sandbox.ErrMoved)
	}
	return fmt.Errorf("session %s: %v: %w", id, err, sandbox.ErrMoved)
}

// Save writes a session's record at this node's epoch; the first save of a new session creates
// it at epoch 1.
func (n *NodeRecords) Save(id string, data []byte, refs []string) error {
	ctx, cancel := n.ctx()
	defer cancel()
	e, addr, ok := n.epoch(id)
	if !ok {
		rec, err := n.store.Create(ctx, Record{Session: id, Owner: n.node, Addr: addr, Refs: refs, Data: data})
		if err == nil {
			n.setEpoch(id, rec.Epoch)
			return nil
		}
		if !errors.Is(err, ErrExists) {
			return err
		}
		cur, err := n.store.Get(ctx, id)
		if err != nil {
			return err
		}
		if cur.Owner != n.node || cur.Released {
			return moved(id, &FencedError{Current: cur})
		}
		e = cur.Epoch // this node's own session, from before a restart
		n.setEpoch(id, e)
	}
	err := n.store.Put(ctx, Record{Session: id, Owner: n.node, Addr: addr, Epoch: e, Refs: refs, Data: data})
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound) {
		n.setEpoch(id, 0)
		return moved(id, err)
	}
	return err
}

// Remove deletes a closed session's record, if this node still owns it.
func (n *NodeRecords) Remove(id string) error {
	ctx, cancel := n.ctx()
	defer cancel()
	e, _, ok := n.epoch(id)
	if !ok {
		cur, err := n.store.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Owner != n.node {
			return moved(id, &FencedError{Current: cur})
		}
		e = cur.Epoch
	}
	n.setEpoch(id, 0)
	err := n.store.Delete(ctx, id, e)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if errors.Is(err, ErrFenced) {
		return moved(id, err)
	}
	return err
}

// Release marks a session's record given up (a drain): any node may claim it at once.
func (n *NodeRecords) Release(id string) error {
	ctx, cancel := n.ctx()
	defer cancel()
	e, _, ok := n.epoch(id)
	cur, err := n.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if !ok || cur.Epoch != e || cur.Owner != n.node {
		return moved(id, &FencedError{Current: cur})
	}
	cur.Released = true
	if err := n.store.Put(ctx, cur); err != nil {
		if errors.Is(err, ErrFenced) {
			return moved(id, err)
		}
		return err
	}
	n.setEpoch(id, 0)
	return nil
}

// Load returns the records of the sessions this node owns (after a restart: not those another
// node adopted meanwhile, nor those it released).
func (n *NodeRecords) Load() (map[string][]byte, error) {
	ctx, cancel := n.ctx()
	defer cancel()
	recs, err := n.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, r := range recs {
		if r.Owner == n.node && !r.Released {
			out[r.Session] = r.Data
			n.setEpoch(r.Session, r.Epoch)
		}
	}
	return out, nil
}

// List returns the current record of every session of the cluster, whichever node owns it.
func (n *NodeRecords) List(ctx context.Context) ([]Record, error) { return n.store.List(ctx) }

// Get returns a session's current record.
func (n *NodeRecords) Get(ctx context.Context, id string) (Record, error) {
	return n.store.Get(ctx, id)
}

// Claim makes this node the session's owner at epoch from+1 (Records.Claim), and remembers the
// epoch for the Manager's writes. A *FencedError names the winner when another node won.
func (n *NodeRecords) Claim(ctx context.Context, id string, from uint64) (Record, error) {
	_, addr, _ := n.epoch(id)
	rec, err := n.store.Claim(ctx, id, from, n.node, addr)
	if err != nil {
		return Record{}, err
	}
	n.setEpoch(id, rec.Epoch)
	return rec, nil
}

// Forget drops what this node remembers of a session it claimed and could not take.
func (n *NodeRecords) Forget(id string) { n.setEpoch(id, 0) }
