// Package wire is the protocol between the daemon and a nano worker process: length-prefixed JSON
// frames over the worker's stdin (requests) and stdout (responses). The worker is untrusted once a
// guest has run in it, so the daemon bounds every frame it reads.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// MaxFrame bounds one frame. Results carry at most the output caps plus the files cap, both far below.
const MaxFrame = 512 << 20

// MaxFilesBytes is the largest private file system a run can have: its files travel in one frame
// each way (the inputs in the request, the changed files in the result), base64 makes them 4/3 as
// large in JSON, and 64 MiB are left for the code, the output (16 MiB per stream at most) and
// the rest. A request whose files limit is above it cannot run in nano.
const MaxFilesBytes = (MaxFrame - 64<<20) / 4 * 3

// Op says what a frame is.
type Op string

const (
	// OpRun (daemon → worker) runs code. In a one-shot worker it takes a warm instance (or starts
	// one) and discards it after; in a session worker it runs in the session's instance.
	OpRun Op = "run"
	// OpReady (worker → daemon) is the first frame: the worker has loaded the engine, is locked
	// down and can take runs.
	OpReady Op = "ready"
	// OpResult (worker → daemon) answers one OpRun with the same ID.
	OpResult Op = "result"
	// OpStatus (worker → daemon) reports the worker's pool after it changed.
	OpStatus Op = "status"
	// OpHibernate (daemon → worker) asks a session worker for a snapshot of its session's
	// parked interpreter (OpResult with Snapshot, or Error when the state cannot be taken out);
	// after a snapshot the worker holds a pristine interpreter again, ready for another session
	// or for an OpRun with Restore.
	OpHibernate Op = "hibernate"
	// OpChunk (worker → daemon) carries output of the run in flight (same ID) as the guest
	// writes it, when the run asked for it (Request.Stream): Stream names stdout or stderr, Data
	// holds the bytes, within the run's caps. The worker coalesces writes for at most
	// ChunkDelay; every chunk of a run comes before its OpResult.
	OpChunk Op = "chunk"
	// OpReset (daemon → worker) makes a session worker drop its session and hold a pristine
	// interpreter again, for another session (OpResult, or Error).
	OpReset Op = "reset"
	// OpSnapshot (daemon → worker) asks a session worker for a snapshot of its session's parked
	// interpreter, as OpHibernate does, but the interpreter stays the session's: a step's
	// snapshot, as an engine.SnapshotDelta (OpResult with Snapshot, or Error).
	OpSnapshot Op = "snapshot"
	// OpRestore (daemon → worker) makes a session worker's interpreter the state in Restore
	// (a snapshot blob), or the step's it kept, at once, whatever it held: a rewind in place.
	// A step it no longer keeps, without Restore, is a not_found Error.
	OpRestore Op = "restore"
	// OpStepSnapshot (worker → daemon) answers an OpRun that asked for its step's snapshot
	// (Request.SnapStep): sent right after the run's OpResult, with the same ID, before the
	// worker reads another request, it carries what OpSnapshot's answer would (Snapshot, or
	// Error), and Took, how long after the result the snapshot was taken and sent.
	OpStepSnapshot Op = "step-snapshot"
)

// Request is a frame from the daemon.
type Request struct {
	Op            Op                   `json:"op"`
	ID            uint64               `json:"id"`
	Code          string               `json:"code,omitempty"`
	Files         []sandbox.File       `json:"files,omitempty"`
	Env           map[string]string    `json:"env,omitempty"`
	Limits        sandbox.Limits       `json:"limits"`
	Deterministic *sandbox.Determinism `json:"deterministic,omitempty"`
	// Restore (OpRun, OpRestore; session workers) is a snapshot from OpHibernate or OpSnapshot
	// to make the worker's pristine interpreter from, before the code runs.
	Restore []byte `json:"restore,omitempty"`
	// Step (OpSnapshot, OpRestore) names a step's snapshot: the session worker keeps its last
	// few, so OpRestore of one it kept needs no Restore.
	Step string `json:"step,omitempty"`
	// Base (OpSnapshot): the daemon holds the snapshot the worker sent last for this session, so
	// the answer may be a delta from it (engine.SnapshotDelta).
	Base bool `json:"base,omitempty"`
	// Stream (OpRun) asks for the run's output as OpChunk frames while it runs.
	Stream bool `json:"stream,omitempty"`
	// SnapStep (OpRun; session workers) asks for a snapshot of the session once the run has
	// answered, kept under this name and sent as an OpStepSnapshot frame (a delta from the one
	// sent last when Base is set): a step's snapshot without a request of its own.
	SnapStep string `json:"snap_step,omitempty"`
}

// ChunkDelay is the longest a worker holds output before it sends it as an OpChunk.
const ChunkDelay = 10 * time.Millisecond

// MaxChunk is the most a worker puts in one OpChunk; more output is sent at once in several.
const MaxChunk = 64 << 10

// Error is a typed failure as it crosses the process boundary.
type Error struct {
	Kind    sandbox.Kind `json:"kind"`
	Message string       `json:"message"`
	Hint    string       `json:"hint,omitempty"`
}

// Response is a frame from the worker.
type Response struct {
	Op     Op              `json:"op"`
	ID     uint64          `json:"id,omitempty"`
	Result *sandbox.Result `json:"result,omitempty"`
	// Error, when set, ended the run; Result then holds what the run produced before it.
	Error *Error `json:"error,omitempty"`
	// OpChunk: the stream ("stdout" or "stderr") and its bytes.
	Stream sandbox.Stream `json:"stream,omitempty"`
	Data   []byte         `json:"data,omitempty"`
	// Snapshot answers OpHibernate, OpSnapshot and, in OpStepSnapshot, a run's SnapStep.
	Snapshot []byte `json:"snapshot,omitempty"`
	// Ring (OpStepSnapshot), instead of Snapshot, says where the snapshot's bytes are in the
	// memory the worker shares with the daemon (Ring): the daemon copies them out when it reads
	// the frame.
	Ring *RingSpan `json:"ring,omitempty"`
	// Took (OpStepSnapshot) is how long after the run's result the snapshot was taken and sent.
	Took time.Duration `json:"took,omitempty"`
	// Warm is how many instances the worker has parked and ready.
	Warm int `json:"warm"`
	// Retire says the worker exits right after this frame and takes no more requests: a guest
	// it could not stop is still computing past its deadline (only ending the process stops it),
	// or, in a session worker, the session's interpreter has ended (os._exit, a crash, a
	// deadline). The daemon should not send it anything more and should replace it.
	Retire bool `json:"retire,omitempty"`
}

// Write writes v as one frame.
func Write(w io.Writer, v any) error {
	// A snapshot travels after the JSON as raw bytes: as base64 inside it, encoding and
	// decoding a step's few hundred KiB cost milliseconds on each side.
	var blob []byte
	switch m := v.(type) {
	case *Request:
		if len(m.Restore) > 0 {
			c := *m
			blob, c.Restore, v = m.Restore, nil, &c
		}
	case *Response:
		if len(m.Snapshot) > 0 {
			c := *m
			blob, c.Snapshot, v = m.Snapshot, nil, &c
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("wire: encode: %w", err)
	}
	if len(b)+len(blob) > MaxFrame {
		return fmt.Errorf("wire: frame of %d bytes is over the %d byte limit", len(b)+len(blob), MaxFrame)
	}
	n := 4 + len(b)
	if blob != nil {
		n += 4 + len(blob)
	}
	buf := make([]byte, n)
	hdr := uint32(len(b))
	if blob != nil {
		hdr |= blobFollows
		binary.BigEndian.PutUint32(buf[4+len(b):], uint32(len(blob)))
		copy(buf[8+len(b):], blob)
	}
	binary.BigEndian.PutUint32(buf, hdr)
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// WriteParts writes a frame of r whose Snapshot is the concatenation of parts (r.Snapshot is
// ignored), as Write would: the same bytes, without joining the parts into one buffer first
// where w is a file (a vectored write).
func WriteParts(w io.Writer, r *Response, parts [][]byte) error {
	c := *r
	c.Snapshot = nil
	b, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("wire: encode: %w", err)
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if len(b)+n > MaxFrame {
		return fmt.Errorf("wire: frame of %d bytes is over the %d byte limit", len(b)+n, MaxFrame)
	}
	head := make([]byte, 8+len(b))
	binary.BigEndian.PutUint32(head, uint32(len(b))|blobFollows)
	copy(head[4:], b)
	binary.BigEndian.PutUint32(head[4+len(b):], uint32(n))
	iovs := append([][]byte{head}, parts...)
	if ok, err := writev(w, iovs); ok {
		return err
	}
	buf := make([]byte, 0, len(head)+n)
	for _, p := range iovs {
		buf = append(buf, p...)
	}
	_, err = w.Write(buf)
	return err
}

// blobFollows, in a frame's length word, says the frame's JSON is followed by a length word and
// that many raw bytes: a Request's Restore or a Response's Snapshot.
const blobFollows = 1 << 31

// Read reads one frame into v. It returns io.EOF only at a clean frame boundary.
func Read(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	withBlob := n&blobFollows != 0
	n &^= blobFollows
	if n > MaxFrame {
		return fmt.Errorf("wire: frame of %d bytes is over the %d byte limit", n, MaxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("wire: short frame: %w", err)
	}
	var blob []byte
	if withBlob {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return fmt.Errorf("wire: short frame: %w", noEOF(err))
		}
		m := binary.BigEndian.Uint32(hdr[:])
		if uint64(m)+uint64(n) > MaxFrame {
			return fmt.Errorf("wire: frame of %d bytes is over the %d byte limit", uint64(m)+uint64(n), MaxFrame)
		}
		blob = make([]byte, m)
		if _, err := io.ReadFull(r, blob); err != nil {
			return fmt.Errorf("wire: short frame: %w", noEOF(err))
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("wire: decode: %w", err)
	}
	if withBlob {
		switch m := v.(type) {
		case *Request:
			m.Restore = blob
		case *Response:
			m.Snapshot = blob
		default:
			return fmt.Errorf("wire: a frame with a snapshot read into %T", v)
		}
	}
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
