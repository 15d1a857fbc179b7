package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Proof shows that one record is in a log: the record's exact line, a signed checkpoint of a
// tree that holds it, and the Merkle path from the record's leaf to that tree's root. Whoever
// holds the log's verifier key checks it (Proof.Verify) without the log: a cluster's gateway
// proves a node's record this way.
type Proof struct {
	Seq int64 `json:"seq"`
	// Record is the record's line, without its newline: the leaf's exact bytes.
	Record string `json:"record"`
	// Checkpoint is the signed note of the tree of Size records the path leads to.
	Checkpoint string      `json:"checkpoint"`
	Size       int64       `json:"size"`
	Hashes     []tlog.Hash `json:"hashes"`
}

// ErrNotSigned says a record is newer than the log's last checkpoint: sign one (Log.Checkpoint)
// and ask again.
var ErrNotSigned = errors.New("audit: the record is newer than the last checkpoint")

// Prove proves record seq of the log in dir against its latest checkpoint, checked with vkey
// (the log's own signing.pub when empty). It reads the records up to that checkpoint once, so
// it costs a read of the log; a record past the last checkpoint is ErrNotSigned.
func Prove(ctx context.Context, dir, vkey string, seq int64) (*Proof, error) {
	v, err := verifierOf(dir, vkey)
	if err != nil {
		return nil, err
	}
	cp, err := lastCheckpoint(filepath.Join(dir, CheckpointsFile), v)
	if err != nil {
		return nil, err
	}
	if seq < 0 {
		return nil, fmt.Errorf("audit: record %d: seq is 0 or more", seq)
	}
	if cp == nil || seq >= cp.Size {
		return nil, ErrNotSigned
	}
	f, err := os.Open(filepath.Join(dir, RecordsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, MaxLine+1)
	var stored hashList
	var record []byte
	for i := int64(0); i < cp.Size; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line, leaf, n, complete, _, err := readLine(br)
		if err != nil {
			return nil, err
		}
		if n == 0 || !complete {
			return nil, fmt.Errorf("audit: the log has %d records, fewer than its checkpoint's %d", i, cp.Size)
		}
		if i == seq {
			record = bytes.Clone(line)
		}
		hs, err := tlog.StoredHashesForRecordHash(i, leaf, stored)
		if err != nil {
			return nil, err
		}
		stored = append(stored, hs...)
	}
	path, err := tlog.ProveRecord(cp.Size, seq, stored)
	if err != nil {
		return nil, err
	}
	p := &Proof{Seq: seq, Record: string(record), Checkpoint: cp.Note, Size: cp.Size, Hashes: path}
	// A log altered since it was signed does not prove itself.
	if err := p.Verify(vkey); err != nil {
		return nil, fmt.Errorf("audit: record %d: %w (run agentbox audit verify)", seq, err)
	}
	return p, nil
}

// Verify checks the proof with the log's verifier key: the checkpoint's signature, that it
// signs a tree of Size records, and that the record's leaf at Seq leads to its root.
func (p *Proof) Verify(vkey string) error {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return fmt.Errorf("audit public key: %w", err)
	}
	n, err := note.Open([]byte(p.Checkpoint), note.VerifierList(v))
	if err != nil {
		return fmt.Errorf("the checkpoint is not signed by %s: %v", vkey, err)
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) != 4 || lines[0] != keyName || lines[1] != fmt.Sprint(p.Size) {
		return fmt.Errorf("the checkpoint does not sign a tree of %d records", p.Size)
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return fmt.Errorf("the checkpoint's root: %v", err)
	}
	if err := tlog.CheckRecord(p.Hashes, p.Size, root, p.Seq, tlog.RecordHash([]byte(p.Record))); err != nil {
		return fmt.Errorf("record %d is not in the signed tree: %v", p.Seq, err)
	}
	return nil
}

// lastCheckpoint is the last checkpoint in path whose signature verifies; nil when none does.
func lastCheckpoint(path string, v note.Verifier) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var last *Checkpoint
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if c, err := openCheckpoint(line, v); err == nil && (last == nil || c.Size >= last.Size) {
			last = &c
		}
	}
	return last, nil
}

// hashList is every stored hash of a tree, by stored index.
type hashList []tlog.Hash

func (h hashList) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(h)) {
			return nil, fmt.Errorf("audit: stored hash %d of %d", x, len(h))
		}
		out[i] = h[x]
	}
	return out, nil
}
