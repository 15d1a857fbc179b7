package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Query limits.
const (
	DefaultQueryLimit = 100
	MaxQueryLimit     = 1000
)

// Filter selects records. Zero fields match everything.
type Filter struct {
	Session string
	// Kind matches a record's kind exactly, or as a prefix up to a dot: "session" matches
	// session.create, session.close and session.expire.
	Kind     string
	Decision string
	// Tenant and Agent match who asked.
	Tenant, Agent string
	// Since and Until bound the record's time: Since <= time < Until.
	Since, Until time.Time
	// Seqs, when set, matches only the records with these sequence numbers (a step's records).
	Seqs []int64
	// Limit is how many of the most recent matches to return. Default DefaultQueryLimit; at
	// most MaxQueryLimit.
	Limit int
}

func (f Filter) match(line []byte) bool {
	// Cheap tests before decoding: a match holds the values it is matched on.
	switch {
	case f.Session != "" && !bytes.Contains(line, []byte(f.Session)),
		f.Kind != "" && !bytes.Contains(line, []byte(`"kind":"`+f.Kind)),
		f.Decision != "" && !bytes.Contains(line, []byte(`"decision":"`+f.Decision+`"`)),
		f.Tenant != "" && !bytes.Contains(line, []byte(`"tenant":"`+f.Tenant+`"`)):
		return false
	}
	var h head
	if err := json.Unmarshal(line, &h); err != nil || h.Seq == nil {
		return false
	}
	switch {
	case f.Session != "" && h.Session != f.Session,
		f.Decision != "" && h.Decision != f.Decision,
		f.Tenant != "" && h.Tenant != f.Tenant,
		f.Agent != "" && h.Agent != f.Agent,
		f.Kind != "" && h.Kind != f.Kind && !strings.HasPrefix(h.Kind, f.Kind+"."),
		!f.Since.IsZero() && h.Time.Before(f.Since),
		!f.Until.IsZero() && !h.Time.Before(f.Until),
		f.Seqs != nil && !slices.Contains(f.Seqs, *h.Seq):
		return false
	}
	return true
}

// Query returns the most recent records that match f, oldest first, as their lines. It reads the
// file from the start (streaming, keeping at most Limit records), so its cost grows with the log:
// about 0.25 s per 100 000 records here.
func (l *Log) Query(ctx context.Context, f Filter) ([]json.RawMessage, error) {
	l.mu.Lock()
	size := l.size
	l.mu.Unlock()
	r, err := os.Open(l.f.Name())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return query(ctx, io.NewSectionReader(r, 0, size), f)
}

// QueryFile queries the log file at path, which a daemon may be appending to: a last line
// without its newline is left out.
func QueryFile(ctx context.Context, path string, f Filter) ([]json.RawMessage, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return query(ctx, r, f)
}

func query(ctx context.Context, r io.Reader, f Filter) ([]json.RawMessage, error) {
	switch {
	case f.Limit <= 0:
		f.Limit = DefaultQueryLimit
	case f.Limit > MaxQueryLimit:
		return nil, fmt.Errorf("audit: limit %d is above the maximum of %d", f.Limit, MaxQueryLimit)
	}
	ring := make([]json.RawMessage, 0, min(f.Limit, 64))
	next := 0 // where the next match goes once the ring is full
	br := bufio.NewReaderSize(r, MaxLine+1)
	for i := 0; ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line, _, n, complete, tooLong, err := readLine(br)
		if err != nil {
			return nil, err
		}
		if n == 0 || !complete {
			break
		}
		if tooLong || !f.match(line) {
			continue
		}
		rec := json.RawMessage(bytes.Clone(line))
		if len(ring) < f.Limit {
			ring = append(ring, rec)
			continue
		}
		ring[next] = rec
		next = (next + 1) % f.Limit
	}
	return append(ring[next:], ring[:next]...), nil
}
