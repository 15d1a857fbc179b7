package audit

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// frontier keeps the right edge of the Merkle tree: for each level, the hash of the last complete
// subtree at that level. That is every stored hash tlog.StoredHashes needs to add a record and
// tlog.TreeHash needs to compute the root, so the log needs O(log n) memory, not a file of all
// stored hashes. (Inclusion proofs for arbitrary records would need the full set; they can be
// recomputed from the records when that feature comes.)
type frontier struct {
	n     int64 // records added
	nodes [64]node
}

type node struct {
	set bool
	n   int64 // index of the node within its level
	h   tlog.Hash
}

// Interface guards.
var _ tlog.HashReader = (*frontier)(nil)

// add appends a record's line (without its newline) as leaf f.n.
func (f *frontier) add(line []byte) error { return f.addHash(tlog.RecordHash(line)) }

// addHash appends a leaf by its record hash (tlog.RecordHash of its line).
func (f *frontier) addHash(leaf tlog.Hash) error {
	hashes, err := tlog.StoredHashesForRecordHash(f.n, leaf, f)
	if err != nil {
		return err
	}
	// hashes[i] is the node at level i, index f.n>>i: the new last complete node of that level.
	for i, h := range hashes {
		f.nodes[i] = node{set: true, n: f.n >> uint(i), h: h}
	}
	f.n++
	return nil
}

// root is the tree hash over the f.n records added.
func (f *frontier) root() (tlog.Hash, error) { return tlog.TreeHash(f.n, f) }

// ReadHashes answers the stored hashes the frontier holds; tlog asks only for those.
func (f *frontier) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		level, n := tlog.SplitStoredHashIndex(idx)
		nd := f.nodes[level]
		if !nd.set || nd.n != n {
			return nil, fmt.Errorf("audit: tree node %d at level %d is not on the frontier", n, level)
		}
		out[i] = nd.h
	}
	return out, nil
}
