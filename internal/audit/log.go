package audit

import (
	"github.com/agentbox-dev/agentbox/internal/sandbox"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/sys/unix"
)

// Options configure a Log. Zero values take the documented defaults.
type Options struct {
	// CheckpointRecords signs a checkpoint once this many records were appended since the last
	// one. Default 256.
	CheckpointRecords int
	// CheckpointInterval signs a checkpoint this long after the last one when records were
	// appended since. Default 10s. Together they bound what a crash can leave unsigned.
	CheckpointInterval time.Duration
	// SyncEveryRecord fsyncs the file after every record instead of at each checkpoint. Default
	// off: each record is one write(2), which survives the daemon being killed; only a crash of
	// the machine can lose the records since the last checkpoint (at most CheckpointInterval).
	// On: about 20x the cost of an append (0.23 ms instead of 11 µs here, doc.go), for logs that
	// must survive power loss record by record.
	SyncEveryRecord bool
	// Logger receives what Open found and failures of the background checkpoints. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Log is an open audit log: it appends records, signs checkpoints, and answers queries. It is
// safe for concurrent use. One process at a time holds a log's directory (an exclusive lock on
// audit.jsonl); Verify and Query may read it meanwhile.
type Log struct {
	dir    string
	opts   Options
	signer note.Signer
	vkey   string
	log    *slog.Logger
	opened *Report

	mu     sync.Mutex
	f      *os.File // audit.jsonl, O_APPEND
	cpf    *os.File // audit.checkpoints, O_APPEND
	tree   frontier
	last   string // hash of the last record
	size   int64  // bytes of complete records
	signed int64  // size of the last checkpoint
	lastT  time.Time
	broken error // set when a failed write could not be undone
	// tornBytes is the torn last line Open cut, until its repair record is written.
	tornBytes []byte
	closed    bool
	// watches are the sessions whose records' sequence numbers someone collects (watch.go),
	// under wmu, not mu: starting or stopping a watch (at every session run) never waits for a
	// record being written. Lock order: mu, then wmu.
	wmu     sync.Mutex
	watches map[string][]*watch

	stop chan struct{}
	done chan struct{}
}

// Open opens (creating it the first time) the audit log in dir: DIR/audit.jsonl (mode 0600),
// DIR/audit.checkpoints, and the signing key DIR/signing.key (0600) with its public half in
// DIR/signing.pub. It verifies the existing file as Verify does (see Opened for the report); the
// cost is a read of the whole file, about 1 s per 100 000 records here (doc.go).
//
// A last line without its newline is a write a crash cut short: Open cuts it and appends a
// log.repair record with the cut bytes' hash and start. Signs of tampering do not stop the
// daemon; Open appends an alert record naming the first one, so the log says what it was found
// to be, and the tampering stays visible to Verify.
func Open(dir string, opts Options) (*Log, error) {
	if opts.CheckpointRecords <= 0 {
		opts.CheckpointRecords = 256
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit directory: %w", err)
	}
	signer, vkey, err := ensureKey(dir)
	if err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts, signer: signer, vkey: vkey, log: opts.Logger,
		stop: make(chan struct{}), done: make(chan struct{})}
	path := filepath.Join(dir, RecordsFile)
	if l.f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		l.f.Close()
		return nil, sandbox.Errorf(sandbox.KindConflict, "audit log %s is in use by another agentbox process (%v)", path, err).
			WithHint("a daemon with this data directory is running: send requests to it, or give this process another data directory (--data-dir)")
	}
	if err := l.recover(v); err != nil {
		l.f.Close()
		return nil, err
	}
	if l.cpf, err = openCheckpoints(filepath.Join(dir, CheckpointsFile), l.log); err != nil {
		l.f.Close()
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	if err := l.afterOpen(); err != nil {
		l.f.Close()
		l.cpf.Close()
		return nil, err
	}
	go l.ticker()
	return l, nil
}

// recover reads the existing log, cuts a torn last line, and takes over the tree.
func (l *Log) recover(v note.Verifier) error {
	if _, err := l.f.Seek(0, 0); err != nil {
		return err
	}
	st, err := scanLog(context.Background(), l.f, filepath.Join(l.dir, CheckpointsFile), v)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	l.opened = st.report
	l.tree, l.last, l.size, l.signed = st.tree, st.last, st.size, st.signed
	if len(st.torn) > 0 {
		if err := l.f.Truncate(st.size); err != nil {
			return fmt.Errorf("audit log: cutting a torn last line: %w", err)
		}
		if err := l.f.Sync(); err != nil {
			return err
		}
		l.tornBytes = st.torn
	}
	return nil
}

// openCheckpoints opens the checkpoints file for appending. A last line without its newline is a
// checkpoint a crash cut short (the records it would have signed are signed again at Open): it is
// cut, or the next checkpoint would be glued to it.
func openCheckpoints(path string, log *slog.Logger) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err == nil && len(b) > 0 && b[len(b)-1] != '\n' {
		keep := int64(bytes.LastIndexByte(b, '\n') + 1)
		log.Warn("audit checkpoints: cut a torn last line", "bytes", int64(len(b))-keep)
		if err = f.Truncate(keep); err == nil {
			err = f.Sync()
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// afterOpen appends what Open has to say and signs what a crash left unsigned.
func (l *Log) afterOpen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if torn := l.tornBytes; torn != nil {
		l.tornBytes = nil
		sum := sha256.Sum256(torn)
		rep := &Repair{Line: l.tree.n + 1, Bytes: int64(len(torn)), SHA256: hex.EncodeToString(sum[:]),
			Excerpt: excerpt(string(torn), MaxExcerpt), Reason: "a write cut short by a crash: the line had no newline"}
		l.log.Warn("audit log: cut a torn last line", "line", rep.Line, "bytes", rep.Bytes)
		if err := l.appendLocked(&Record{Kind: KindRepair, Repair: rep}); err != nil {
			return err
		}
	}
	if r := l.opened; !r.OK() {
		l.log.Error("audit log: signs of tampering", "dir", l.dir, "first", r.Problems[0].Message, "problems", len(r.Problems)+r.Omitted)
		msg := fmt.Sprintf("at open, verification found %d problems; the first: %s", len(r.Problems)+r.Omitted, r.Problems[0].Message)
		if err := l.appendLocked(&Record{Kind: KindAlert, Alert: &Alert{Source: "audit", Message: excerpt(msg, MaxExcerpt)}}); err != nil {
			return err
		}
	}
	return l.checkpointLocked()
}

// Opened is the verification report of the log as Open found it.
func (l *Log) Opened() *Report { return l.opened }

// PublicKey is the verifier key of the log's checkpoints (the content of signing.pub).
func (l *Log) PublicKey() string { return l.vkey }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit log is closed")

// Append writes r as the next record; it fills Seq, Time, Prev and Hash (any values given are
// replaced). The record is one write(2) of one line. Kind is required; egress records get their
// credential headers masked and their excerpt bounded.
func (l *Log) Append(ctx context.Context, r Record) error {
	if r.Kind == "" {
		return errors.New("audit: a record needs a kind")
	}
	if r.Egress != nil {
		e := *r.Egress
		e.Headers = maskHeaders(e.Headers)
		e.BodyExcerpt = excerpt(e.BodyExcerpt, MaxExcerpt)
		r.Egress = &e
	}
	if r.MCP != nil {
		m := *r.MCP
		m.ArgsExcerpt, m.ResultExcerpt = excerpt(m.ArgsExcerpt, MaxExcerpt), excerpt(m.ResultExcerpt, MaxExcerpt)
		r.MCP = &m
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendLocked(&r); err != nil {
		return err
	}
	if l.tree.n-l.signed >= int64(l.opts.CheckpointRecords) {
		return l.checkpointLocked()
	}
	return nil
}

func (l *Log) appendLocked(r *Record) error {
	switch {
	case l.closed:
		return ErrClosed
	case l.broken != nil:
		return l.broken
	}
	now := l.opts.Now().UTC()
	if now.Before(l.lastT) {
		now = l.lastT // the clock stepped back: keep times in the order of the records
	}
	r.Seq, r.Time, r.Prev, r.Hash = l.tree.n, now, l.last, ""
	line, hash, err := encodeLine(r)
	if err != nil {
		return err
	}
	if len(line) >= MaxLine {
		return fmt.Errorf("audit: a %s record of %d bytes is over the limit of %d", r.Kind, len(line), MaxLine)
	}
	buf := append(line, '\n')
	n, err := l.f.Write(buf)
	if err != nil || n != len(buf) {
		// Undo a partial line, or every later record would follow garbage.
		if terr := l.f.Truncate(l.size); terr != nil {
			l.broken = fmt.Errorf("audit log: a failed write (%v) could not be undone: %v", err, terr)
			return l.broken
		}
		if err == nil {
			err = fmt.Errorf("short write (%d of %d bytes)", n, len(buf))
		}
		return fmt.Errorf("audit log: %w", err)
	}
	if err := l.tree.add(line); err != nil {
		panic(err) // the frontier always holds what tlog asks for
	}
	l.size += int64(len(buf))
	l.last, l.lastT = hash, now
	if r.Session != "" {
		l.wmu.Lock()
		for _, w := range l.watches[r.Session] {
			if len(w.seqs) < maxWatched {
				w.seqs = append(w.seqs, r.Seq)
			}
		}
		l.wmu.Unlock()
	}
	if l.opts.SyncEveryRecord {
		return l.f.Sync()
	}
	return nil
}

// Checkpoint signs the tree as it is now, unless nothing was appended since the last checkpoint.
// The records are fsynced before the checkpoint is written, so a checkpoint never covers records
// a crash could lose.
func (l *Log) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.checkpointLocked()
}

func (l *Log) checkpointLocked() error {
	if l.tree.n == l.signed || l.broken != nil {
		return l.broken
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	root, err := l.tree.root()
	if err != nil {
		return err
	}
	c, err := signCheckpoint(l.signer, l.tree.n, root, l.opts.Now())
	if err != nil {
		return err
	}
	line, err := checkpointLine(c)
	if err != nil {
		return err
	}
	if _, err := l.cpf.Write(line); err != nil {
		return fmt.Errorf("audit checkpoints: %w", err)
	}
	if err := l.cpf.Sync(); err != nil {
		return fmt.Errorf("audit checkpoints: %w", err)
	}
	l.signed = l.tree.n
	return nil
}

// ticker signs a checkpoint every CheckpointInterval when records came in since the last one.
func (l *Log) ticker() {
	defer close(l.done)
	t := time.NewTicker(l.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if err := l.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
			l.log.Error("audit log: checkpoint failed", "err", err)
		}
	}
}

// Close signs a last checkpoint, syncs and closes the files. It is safe to call more than once.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	err := l.checkpointLocked()
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if serr := l.f.Sync(); err == nil {
		err = serr
	}
	for _, f := range []*os.File{l.cpf, l.f} {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Records is how many records the log holds.
func (l *Log) Records() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tree.n
}

// credentialHeaders are masked in every egress record, whatever the DLP detectors found: their
// values are credentials by definition.
var credentialHeaders = map[string]bool{
	"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true,
	"x-api-key": true, "api-key": true, "x-auth-token": true,
}

// maskHeaders returns h with credential values replaced by "[REDACTED]" (an auth scheme such
// as "Bearer" is kept), and every value bounded.
func maskHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return h
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if credentialHeaders[strings.ToLower(k)] && v != "" && !strings.Contains(v, "[REDACTED") && v != "[masked]" {
			scheme, _, found := strings.Cut(v, " ")
			v = "[REDACTED]"
			if found && strings.ToLower(k) != "cookie" && strings.ToLower(k) != "set-cookie" {
				v = scheme + " [REDACTED]"
			}
		}
		out[k] = excerpt(v, 256)
	}
	return out
}

// excerpt is at most n bytes of s, cut on a character boundary, with invalid UTF-8 replaced.
func excerpt(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
