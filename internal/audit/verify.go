package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Report is what Verify found.
type Report struct {
	// Records is the number of complete lines in audit.jsonl.
	Records int64
	// Checkpoints is the number of lines in audit.checkpoints; Last is the last one whose
	// signature verifies.
	Checkpoints int
	Last        *Checkpoint
	// Unsigned counts the records after the last checkpoint: only their hashes and the chain
	// vouch for them, not a signature.
	Unsigned int64
	// Problems are the signs of tampering, the first altered or missing record first.
	Problems []Problem
	// Omitted counts problems not listed (past maxProblems).
	Omitted int
	// Warnings are oddities that are not tampering, such as a last line cut short by a crash.
	Warnings []string
}

// Problem is one sign of tampering.
type Problem struct {
	// Record is the 0-based index of the record it names; -1 when it names none (a forged
	// checkpoint). Line is Record's line in audit.jsonl, 1-based; 0 when none.
	Record  int64
	Line    int64
	Message string
}

const maxProblems = 100

// OK reports whether no sign of tampering was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// First is the problem to show first, or nil.
func (r *Report) First() *Problem {
	if len(r.Problems) == 0 {
		return nil
	}
	return &r.Problems[0]
}

// String is a one-line summary: the counts and "ok", or the first problem.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records, %d checkpoints", r.Records, r.Checkpoints)
	if r.Last != nil {
		fmt.Fprintf(&b, ", last signed at %s (size %d)", r.Last.Time.Format(time.RFC3339), r.Last.Size)
	}
	if r.Unsigned > 0 {
		fmt.Fprintf(&b, "; %d records after it checked by the chain only", r.Unsigned)
	}
	if r.OK() {
		b.WriteString("; ok")
		return b.String()
	}
	fmt.Fprintf(&b, "; FAILED: %s", r.Problems[0].Message)
	if n := len(r.Problems) - 1 + r.Omitted; n > 0 {
		fmt.Fprintf(&b, " (and %d more problems)", n)
	}
	return b.String()
}

// Verify checks the audit log in dir against the public key vkey (the text of signing.pub; empty
// means dir's own signing.pub, which proves little if the same attacker could replace it: keep a
// copy elsewhere). It returns an error only when the files cannot be read; tampering is in the
// report.
//
// It re-hashes every record and checks that the record's own hash matches its content, that its
// seq is its position, and that its prev is the hash of the record before (the chain); it
// rebuilds the Merkle tree over the lines, checks every checkpoint's signature, and that every
// checkpoint's root is the root of the tree of that size. Records after the last checkpoint are
// vouched for by the chain only.
func Verify(ctx context.Context, dir, vkey string) (*Report, error) {
	v, err := verifierOf(dir, vkey)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, RecordsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := scanLog(ctx, f, filepath.Join(dir, CheckpointsFile), v)
	if err != nil {
		return nil, err
	}
	return st.report, nil
}

// state is what a scan of the log leaves: the report, and what Open needs to go on appending.
type state struct {
	report *Report
	tree   frontier
	// last is the hash field of the last complete line; size is the offset after it.
	last string
	size int64
	// torn is the incomplete last line, if any.
	torn []byte
	// signed is the size of the last valid checkpoint.
	signed int64
}

// scan is the verifier's walk over the records.
type scan struct {
	state
	cps []Checkpoint // valid checkpoints, by size
	ci  int          // next checkpoint to check

	// prevHash is the hash field of the previous line; prevBad says that line had a problem of
	// its own, so the link to it is not checked (one edit, one problem).
	prevHash string
	prevBad  bool
	maxSeq   int64
	// gap is records found missing by a jump in seq, kept one line to tell a removal from two
	// records swapped.
	gap *gap
	// window is the index in Problems of the first problem since the last checkpoint that
	// matched (-1: none); treeBroken is set once a checkpoint did not match.
	window     int
	treeBroken bool
}

type gap struct{ from, to, line, seq int64 }

// scanLog verifies the records read from r against the checkpoints in cpPath.
func scanLog(ctx context.Context, r io.Reader, cpPath string, v note.Verifier) (*state, error) {
	s := &scan{maxSeq: -1, window: -1}
	s.report = &Report{}
	if err := s.loadCheckpoints(cpPath, v); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, MaxLine+1)
	for i := int64(0); ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line, leaf, n, complete, tooLong, err := readLine(br)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		if !complete {
			s.torn = bytes.Clone(line)
			break
		}
		s.size += n
		s.record(i, line, leaf, tooLong)
	}
	s.finish()
	return &s.state, nil
}

// readLine reads one line. line is its content without the newline (cut at MaxLine when tooLong),
// leaf its tlog record hash over all of its bytes, n the bytes consumed, complete whether it
// ended with a newline.
func readLine(br *bufio.Reader) (line []byte, leaf tlog.Hash, n int64, complete, tooLong bool, err error) {
	b, err := br.ReadSlice('\n')
	n = int64(len(b))
	switch {
	case err == nil:
		line = b[:len(b)-1]
		return line, tlog.RecordHash(line), n, true, false, nil
	case errors.Is(err, io.EOF):
		return b, tlog.Hash{}, n, false, false, nil
	case !errors.Is(err, bufio.ErrBufferFull):
		return nil, tlog.Hash{}, n, false, false, err
	}
	// Longer than any record Append writes: hash it all, keep its start.
	line = bytes.Clone(b)
	h := sha256.New()
	h.Write([]byte{0}) // tlog's record-hash prefix
	h.Write(b)
	for {
		b, err = br.ReadSlice('\n')
		n += int64(len(b))
		switch {
		case err == nil:
			h.Write(b[:len(b)-1])
			var leaf tlog.Hash
			h.Sum(leaf[:0])
			return line, leaf, n, true, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			h.Write(b)
		case errors.Is(err, io.EOF):
			return line, tlog.Hash{}, n, false, true, nil
		default:
			return nil, tlog.Hash{}, n, false, true, err
		}
	}
}

// loadCheckpoints reads and checks every checkpoint; the valid ones are kept for the walk.
func (s *scan) loadCheckpoints(path string, v note.Verifier) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		s.report.Checkpoints++
		if line[len(line)-1] != '\n' {
			s.report.Checkpoints--
			s.report.Warnings = append(s.report.Warnings, fmt.Sprintf(
				"line %d of %s is incomplete (%d bytes without a newline): a checkpoint cut short by a crash; it is ignored", i+1, CheckpointsFile, len(line)))
			continue
		}
		c, err := openCheckpoint(line[:len(line)-1], v)
		if err != nil {
			s.problem(-1, fmt.Sprintf("checkpoint %d (line %d of %s): %v", i, i+1, CheckpointsFile, err))
			continue
		}
		if n := len(s.cps); n > 0 && (c.Size < s.cps[n-1].Size || c.Time.Before(s.cps[n-1].Time)) {
			s.problem(-1, fmt.Sprintf("checkpoint %d (line %d of %s) is out of order: %s comes after %s",
				i, i+1, CheckpointsFile, c.label(), s.cps[n-1].label()))
			continue
		}
		s.cps = append(s.cps, c)
		s.report.Last = &s.cps[len(s.cps)-1]
	}
	// Problems so far name no record; the walk's window starts after them.
	return nil
}

// problem records a sign of tampering naming record i (-1: none) and returns its index in
// Problems, or -1 when the list is full.
func (s *scan) problem(i int64, msg string) int {
	if len(s.report.Problems) >= maxProblems {
		s.report.Omitted++
		return -1
	}
	line := int64(0)
	if i >= 0 {
		line = i + 1
	}
	s.report.Problems = append(s.report.Problems, Problem{Record: i, Line: line, Message: msg})
	idx := len(s.report.Problems) - 1
	if i >= 0 && s.window < 0 {
		s.window = idx
	}
	return idx
}

// record checks line i (0-based) and adds it to the tree.
func (s *scan) record(i int64, line []byte, leaf tlog.Hash, tooLong bool) {
	if err := s.tree.addHash(leaf); err != nil {
		panic(err) // the frontier always holds what tlog asks for
	}
	ln := i + 1
	bad := true
	var h head
	var ok bool
	var err error
	if tooLong {
		err = fmt.Errorf("longer than %d bytes", MaxLine)
	} else {
		h, ok, err = parseLine(line)
	}
	switch {
	case err != nil:
		s.problem(i, fmt.Sprintf("record %d (line %d) was altered: it is %v", i, ln, err))
		s.maxSeq++ // its seq cannot be trusted: let it stand for the next record
	case !ok:
		s.problem(i, fmt.Sprintf("record %d (line %d) was altered: its content does not match its hash", i, ln))
		s.maxSeq++
	default:
		bad = s.checkSeq(i, *h.Seq) || s.checkLink(i, h)
	}
	s.last, s.prevHash, s.prevBad = h.Hash, h.Hash, bad
	s.checkpoints()
}

// checkSeq checks that seq follows the records before; it reports whether it found a problem.
func (s *scan) checkSeq(i, seq int64) bool {
	ln := i + 1
	if g := s.gap; g != nil {
		s.gap = nil
		if seq >= g.from && seq <= g.to {
			s.problem(seq, fmt.Sprintf("records %d and %d are out of order: line %d holds record %d and line %d holds record %d",
				seq, g.seq, g.line, g.seq, ln, seq))
			if seq > s.maxSeq {
				s.maxSeq = seq
			}
			return true
		}
		s.missing(g)
	}
	want := s.maxSeq + 1
	switch {
	case seq == want:
		s.maxSeq = seq
		return false
	case seq > want:
		s.gap = &gap{from: want, to: seq - 1, line: ln, seq: seq}
		s.maxSeq = seq
		return true
	default:
		s.problem(i, fmt.Sprintf("record %d (line %d) is out of place: it says it is record %d, which came before", i, ln, seq))
		return true
	}
}

func (s *scan) missing(g *gap) {
	s.problem(g.from, fmt.Sprintf("%s: line %d holds record %d", span(g.from, g.to), g.line, g.seq))
}

// span says that records from..to are missing.
func span(from, to int64) string {
	if from == to {
		return fmt.Sprintf("record %d is missing", from)
	}
	return fmt.Sprintf("records %d to %d are missing", from, to)
}

// checkLink checks that record i's prev is the hash of the line before it.
func (s *scan) checkLink(i int64, h head) bool {
	switch {
	case i == 0 && h.Prev != "":
		s.problem(0, "record 0 (line 1) has a prev: the records before it were removed")
		return true
	case i == 0 || s.prevBad || h.Prev == s.prevHash:
		return false
	}
	// Both records match their own hashes, so one was rewritten whole, hash and all.
	s.problem(i-1, fmt.Sprintf("record %d (line %d) was altered and its hash recomputed: record %d's prev does not match it",
		i-1, i, i))
	return true
}

// checkpoints compares the tree with every checkpoint of its size.
func (s *scan) checkpoints() {
	for s.ci < len(s.cps) && s.cps[s.ci].Size <= s.tree.n {
		c := s.cps[s.ci]
		s.ci++
		s.signed = c.Size
		if c.Size < s.tree.n {
			continue // a checkpoint of size 0
		}
		root, err := s.tree.root()
		if err != nil {
			panic(err)
		}
		if root == c.Root {
			s.window = -1
			continue
		}
		if s.treeBroken {
			continue // already reported; every later checkpoint differs as well
		}
		s.treeBroken = true
		if s.window >= 0 {
			s.report.Problems[s.window].Message += ", and the " + c.label() + " does not match"
			continue
		}
		from := s.lastGood()
		s.problem(from, fmt.Sprintf("a record among %d to %d (lines %d to %d) was altered, with its hash and the chain recomputed: the %s does not match",
			from, c.Size-1, from+1, c.Size, c.label()))
	}
}

// lastGood is the size of the last checkpoint before the current one whose root matched, or 0.
func (s *scan) lastGood() int64 {
	for j := s.ci - 2; j >= 0; j-- {
		if s.cps[j].Size < s.cps[s.ci-1].Size {
			return s.cps[j].Size
		}
	}
	return 0
}

// finish reports what only the end of the file shows: a removal at the end, a torn last line,
// and checkpoints beyond the last record.
func (s *scan) finish() {
	if s.gap != nil {
		s.missing(s.gap)
		s.gap = nil
	}
	n := s.tree.n
	s.report.Records = n
	var beyond *Checkpoint
	if s.ci < len(s.cps) {
		beyond = &s.cps[len(s.cps)-1]
	}
	if len(s.torn) > 0 {
		sum := sha256.Sum256(s.torn)
		if beyond != nil {
			s.problem(n, fmt.Sprintf("record %d (line %d) was cut short (%d bytes without a newline), and the %s covers it",
				n, n+1, len(s.torn), beyond.label()))
		} else {
			s.report.Warnings = append(s.report.Warnings, fmt.Sprintf(
				"line %d is incomplete (%d bytes without a newline, sha256 %s): a write cut short by a crash (or being made right now, if a daemon is running); the daemon cuts a torn line at its next start and records a %s record",
				n+1, len(s.torn), hex.EncodeToString(sum[:8]), KindRepair))
		}
	}
	if beyond != nil && len(s.torn) == 0 {
		s.problem(n, fmt.Sprintf("the log was truncated: it holds %d records, but the %s covers %d (%s)",
			n, beyond.label(), beyond.Size, span(n, beyond.Size-1)))
	}
	if s.signed > n {
		s.signed = n
	}
	s.report.Unsigned = n - s.signed
	sort.SliceStable(s.report.Problems, func(a, b int) bool {
		pa, pb := s.report.Problems[a], s.report.Problems[b]
		if (pa.Record < 0) != (pb.Record < 0) {
			return pa.Record >= 0
		}
		return pa.Record < pb.Record
	})
}

// verifierOf is the verifier of vkey, or of the log's own signing.pub in dir when vkey is empty.
func verifierOf(dir, vkey string) (note.Verifier, error) {
	if vkey == "" {
		var err error
		if vkey, err = ReadPub(filepath.Join(dir, PubFile)); err != nil {
			return nil, err
		}
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("audit public key: %w", err)
	}
	return v, nil
}
