package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
)

// A session's record as a journal. Written whole, a record costs every change as much as the
// session has steps (each with its code and output, up to 1000 of them): on a rewind, which
// waits for the record to name the new head so that a kill -9 right after the answer brings the
// session back there, that was most of the rewind. Where the records can append
// (RecordJournal: the daemon's directory), a change is an entry of its own instead: the
// record's small fields (head, state, references, the description) and the steps added or
// changed since the entry before, or forgotten (Gone), one line of JSON each, numbered (Seq).
// The whole record is written again once the journal has grown past it (never on a rewind),
// and the journal then dropped; an entry whose Seq the whole record has already is skipped, so a
// kill -9 between the two loses nothing. Reading a record applies its journal; a last line
// without its newline, or that does not parse, is where the daemon was killed while writing it:
// it and anything after it are ignored. The shared store of a cluster (package sharedstore) keeps
// whole records: it cannot append, and its readers on other nodes read only those.

// RecordJournal is an optional ability of SessionRecords: appending a change to a session's
// record rather than rewriting it. Load returns the records with their journals applied, Save
// drops the journal the whole record includes.
type RecordJournal interface {
	// Append adds one entry (a line of JSON, without its newline) to the session's journal.
	Append(id string, entry []byte) error
}

// journalExt names a session's journal beside its record in a records directory.
const journalExt = ".journal"

// Compaction: the whole record is written again once its journal holds more than
// journalMinBytes and more bytes than the whole record, or journalMaxEntries entries.
const (
	journalMinBytes   = 64 << 10
	journalMaxEntries = 512
)

// recordJournal is what a session's Manager wrote of its record: whether a whole record is
// there to append to, the last Seq, how much the journal holds, and each step as last written
// (to find those that changed). Guarded by session.saveMu.
type recordJournal struct {
	based   bool
	seq     uint64
	entries int
	bytes   int
	whole   int
	steps   map[string]stepMark
}

// stepMark is what may change of a step once recorded (its snapshot, its audit records) and a
// few fields that never should, so that a change nobody expected is still written.
type stepMark struct {
	snap                   StepSnapshot
	audits, outs, arts     int
	stdout, stderr, parent string
	exit                   int
	kind                   Kind
}

func markOf(st *Step) stepMark {
	return stepMark{snap: st.Snapshot, audits: len(st.AuditRecords), outs: len(st.Outputs), arts: len(st.Artifacts),
		stdout: st.Stdout, stderr: st.Stderr, parent: st.Parent, exit: st.ExitCode, kind: st.ErrorKind}
}

// due says the journal is to be compacted: written whole.
func (j *recordJournal) due() bool {
	return j.entries >= journalMaxEntries || j.bytes > journalMinBytes && j.bytes > j.whole
}

// entry is v as a journal entry: its small fields, the steps that changed since the last write,
// those gone, and the next Seq.
func (j *recordJournal) entry(v *savedSession) *savedSession {
	e := *v
	e.Steps, e.Gone = nil, nil
	e.Seq = j.seq + 1
	present := make(map[string]bool, len(v.Steps))
	for _, st := range v.Steps {
		present[st.ID] = true
		if m, ok := j.steps[st.ID]; !ok || m != markOf(st) {
			e.Steps = append(e.Steps, st)
		}
	}
	for id := range j.steps {
		if !present[id] {
			e.Gone = append(e.Gone, id)
		}
	}
	return &e
}

// appended notes that entry seq (n bytes), made from v, is in the journal.
func (j *recordJournal) appended(v *savedSession, seq uint64, n int) {
	j.seq = seq
	j.entries++
	j.bytes += n + 1
	j.mark(v)
}

// rebase notes that v was written whole (n bytes): the journal is empty.
func (j *recordJournal) rebase(v *savedSession, n int) {
	j.based, j.entries, j.bytes, j.whole = true, 0, 0, n
	j.mark(v)
}

func (j *recordJournal) mark(v *savedSession) {
	if j.steps == nil || len(j.steps) > 2*len(v.Steps)+16 {
		j.steps = make(map[string]stepMark, len(v.Steps))
	}
	present := make(map[string]bool, len(v.Steps))
	for _, st := range v.Steps {
		j.steps[st.ID] = markOf(st)
		present[st.ID] = true
	}
	for id := range j.steps {
		if !present[id] {
			delete(j.steps, id)
		}
	}
}

// applyJournal returns the record with the entries of journal applied that it does not have
// yet, in order. The first line that is torn (no newline) or does not parse ends the journal.
func applyJournal(record, journal []byte) ([]byte, error) {
	var v savedSession
	if err := json.Unmarshal(record, &v); err != nil {
		return nil, err
	}
	for len(journal) > 0 {
		line, rest, ok := bytes.Cut(journal, []byte{'\n'})
		if !ok {
			break // torn: the daemon was killed while writing it
		}
		journal = rest
		var e savedSession
		if err := json.Unmarshal(line, &e); err != nil || e.Seq == 0 {
			break
		}
		if e.Info.ID != v.Info.ID {
			return nil, errors.New("a journal entry of another session")
		}
		if e.Seq <= v.Seq {
			continue // the whole record has it
		}
		apply(&v, &e)
	}
	return json.Marshal(v)
}

// apply makes v what it was when entry e was written.
func apply(v, e *savedSession) {
	steps := v.Steps
	if len(e.Gone) > 0 {
		gone := make(map[string]bool, len(e.Gone))
		for _, id := range e.Gone {
			gone[id] = true
		}
		kept := steps[:0]
		for _, st := range steps {
			if !gone[st.ID] {
				kept = append(kept, st)
			}
		}
		steps = kept
	}
	if len(e.Steps) > 0 {
		at := make(map[string]int, len(steps))
		for i, st := range steps {
			at[st.ID] = i
		}
		for _, st := range e.Steps {
			if i, ok := at[st.ID]; ok {
				steps[i] = st
			} else {
				at[st.ID] = len(steps)
				steps = append(steps, st)
			}
		}
	}
	*v = *e
	v.Steps, v.Gone = steps, nil
}
