// Package proto is the protocol between the daemon and the guest agent inside a VM-like sandbox
// (package guest): length-prefixed JSON frames over the sandbox's stdin (daemon → guest) and stdout
// (guest → daemon), whatever carries them (a gVisor container's stdio today). There is nothing else
// between them: no sockets, nothing listening inside.
//
// A frame is a 4-byte big-endian length followed by that many bytes of JSON. The guest's first
// frame is OpHello with the protocol Version it speaks; the daemon refuses a guest of another
// version. Every request carries an ID; the answers to it carry the same ID. Either side treats a
// frame it cannot decode, an oversized frame or an unknown op as a broken peer and ends that one
// sandbox.
//
// The guest is untrusted once user code has run in the sandbox (it runs as root there, and the
// code runs beside it), so the daemon bounds every frame it reads and checks every answer.
package proto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/tunnel"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Version is the protocol version. Bump it on any incompatible change of the frames below.
const Version = 2

// MaxFrame bounds one frame. The largest legitimate frames carry files: at most the files cap
// (512 MiB server maximum) base64-encoded, which a single file frame never reaches because
// request files are bounded far below.
const MaxFrame = 768 << 20

// What one run returns besides its streams and files. The guest keeps to these caps (its REPL
// drops what does not fit and says so on the run's stderr); the daemon checks them again.
const (
	// MaxArtifacts and MaxArtifactsBytes bound a run's artifacts (the figures it drew): 64 of
	// them, 32 MiB in all. A figure is typically 10–100 KB; the cap is fixed rather than taken
	// from the files limit because the result frame carries both.
	MaxArtifacts      = 64
	MaxArtifactsBytes = 32 << 20
	// MaxOutputs bounds the rich outputs of a run (today only its last expression's value).
	MaxOutputs = 16
	// MaxOutputText bounds an output's text (longer text is cut, and says so); MaxOutputHTML and
	// MaxOutputJSON its HTML and JSON (a longer one is left out: half a table or half a JSON
	// document is worse than none).
	MaxOutputText = 64 << 10
	MaxOutputHTML = 1 << 20
	MaxOutputJSON = 4 << 20
)

// Op says what a frame is.
type Op string

// Requests (daemon → guest).
const (
	// OpRun runs Code in the sandbox's Python process. Answers: any number of OpOutput frames,
	// then one OpResult.
	OpRun Op = "run"
	// OpInterrupt raises KeyboardInterrupt in the running cell (as Ctrl-C would). If the cell does
	// not end within Grace, the Python process is killed and restarted: the cell's OpResult then
	// says StateLost. Answer: none of its own (the run's OpResult follows).
	OpInterrupt Op = "interrupt"
	// The four file operations act as the sandbox's user, under the session's directories (the
	// work directory and /tmp), never following a symbolic link out of them (package guest,
	// files.go).
	//
	// OpWriteFile writes Content to Path (parents created). Answer: OpOK or OpError.
	OpWriteFile Op = "write_file"
	// OpReadFile answers OpFile with Path's content, or OpError.
	OpReadFile Op = "read_file"
	// OpListFiles answers OpFiles with the entries under Path (recursively; links listed as
	// links, not followed), or OpError.
	OpListFiles Op = "list_files"
	// OpDeleteFile deletes Path (a directory with everything under it; a link, not what it
	// points to). Answer: OpOK or OpError.
	OpDeleteFile Op = "delete_file"
	// OpStats answers OpStats with the sandbox's resource use.
	OpStats Op = "stats"
	// OpShutdown ends the guest and so the sandbox. No answer.
	OpShutdown Op = "shutdown"
	// OpEgress opens the sandbox's way out: the guest adds CA (the egress gateway's certificate)
	// to the sandbox's trust store and listens on 127.0.0.1:Port, carrying each connection to
	// the daemon as a tunnel stream. Answer: OpOK or OpError.
	OpEgress Op = "egress"
	// OpSpawn starts a long-lived child process (Spawn: its command line) with piped stdio, as
	// the sandbox's user in the work directory: a hosted MCP server speaking over its stdin and
	// stdout. The answers carry the request's ID: OpOutput frames with what it writes on stdout
	// and stderr, then one OpExit when it has ended (or one OpError if it could not start).
	// OpStdin frames with the same ID feed its stdin (Close: close it), OpKill ends it. A guest
	// older than these ops treats them as unknown and ends its sandbox.
	OpSpawn Op = "spawn"
	OpStdin Op = "stdin"
	OpKill  Op = "kill"
	// Snapshots of a session's state after a run, kept in the sandbox (package guest, snaps.go):
	// the Python process forked, the child parked, and the work directory's files in a tree of
	// hard links under a root-only directory. A guest that has them says so in its hello
	// (FeatureSnapshots); the daemon sends them to no other.
	//
	// OpSnapshot takes snapshot Snap of the state now (between runs), keeping at most MaxBytes
	// of new file content for it (0: no cap). Answer: OpSnapshot with SnapInfo, or OpError
	// (KindConflict for a Snap already taken, KindOutputLimit when the files exceed MaxBytes).
	// With Quiet (FeatureQuietSnaps), the snapshot is taken in an idle session to stand in for
	// its latest step's parked process (the daemon drops that one next): the live process does
	// not warm itself after the fork, and the child parks where gVisor's copy-behind does not
	// run, so the two share the memory until the live process next writes it.
	OpSnapshot Op = "snapshot"
	// OpRewind ends the live Python process and goes on from snapshot Snap: its variables and
	// its work directory's files. The snapshot stays kept. Answer: OpOK, or OpError
	// (KindNotFound for a snapshot that is not kept).
	OpRewind Op = "rewind"
	// OpDropSnaps drops the snapshots Snaps (those not kept are ignored). Answer: OpOK.
	OpDropSnaps Op = "drop_snaps"
)

// Features a guest says it has in its hello.
const (
	// FeatureSnapshots: OpSnapshot, OpRewind and OpDropSnaps.
	FeatureSnapshots = "snapshots"
	// FeatureHostStdio: the sandbox's init holds HostStdinFD and HostStdoutFD, two host pipes
	// the daemon passed into the sandbox (runsc --pass-fd), and OpSpawn's HostStdio gives them
	// to the child as its stdin and stdout.
	FeatureHostStdio = "host-stdio"
	// FeatureContexts: OpRun's Context fields (code contexts, sandbox.RunRequest.Context). The
	// daemon refuses a context run to a guest without it (an image built before it).
	FeatureContexts = "contexts"
	// FeatureStepSnapshots: OpRun's SnapAfter (a step's snapshot rides on its run).
	FeatureStepSnapshots = "step-snapshots"
	// FeatureQuietSnaps: OpSnapshot's Quiet.
	FeatureQuietSnaps = "quiet-snaps"
)

// The descriptors of the host pipes a sandbox made for one long-lived child gets
// (FeatureHostStdio): the child's stdin (read end) and its stdout (write end). The bytes cross
// the boundary without frames or the agent: the sentry reads and writes the host pipe for the
// child, which saves a hop through the agent and its encoding each way on every message.
const (
	HostStdinFD  = 3
	HostStdoutFD = 4
)

// Tunnel streams (both directions; ID 0, Conn names the stream). See package tunnel.
const (
	OpConnOpen  Op = "conn_open"
	OpConnData  Op = "conn_data"
	OpConnAck   Op = "conn_ack"
	OpConnClose Op = "conn_close"
)

// Answers (guest → daemon).
const (
	// OpHello is the guest's first frame: it is ready to take runs.
	OpHello Op = "hello"
	// OpOutput carries a chunk of a run's stdout or stderr as the code prints it.
	OpOutput Op = "output"
	// OpArtifact carries an artifact of a run as soon as the code made it (a figure shown),
	// when the run asked for it (RunRequest.StreamArtifacts); the run's OpResult still lists
	// every artifact. A daemon that does not ask never gets one.
	OpArtifact Op = "artifact"
	// OpResult ends a run.
	OpResult Op = "result"
	OpOK     Op = "ok"
	OpFile   Op = "file"
	OpFiles  Op = "files"
	OpError  Op = "error"
	// OpExit ends an OpSpawn: the child has exited (ExitCode; -1 for a signal) and everything it
	// wrote has been sent.
	OpExit Op = "exit"
)

// Stream names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Frame is every frame of the protocol; which fields are set depends on Op.
type Frame struct {
	Op Op     `json:"op"`
	ID uint64 `json:"id,omitempty"`

	// OpHello.
	Version       int      `json:"version,omitempty"`
	PythonVersion string   `json:"python_version,omitempty"`
	Features      []string `json:"features,omitempty"`

	// Snapshots: OpSnapshot's and OpRewind's Snap, OpSnapshot's MaxBytes and answer, the
	// snapshots OpDropSnaps drops.
	Snap     uint64    `json:"snap,omitempty"`
	MaxBytes int64     `json:"max_bytes,omitempty"`
	Quiet    bool      `json:"quiet,omitempty"`
	SnapInfo *SnapInfo `json:"snap_info,omitempty"`
	Snaps    []uint64  `json:"snaps,omitempty"`

	// OpRun.
	Run *RunRequest `json:"run,omitempty"`
	// OpInterrupt: how long the cell may take to end after KeyboardInterrupt before the Python
	// process is restarted.
	Grace time.Duration `json:"grace,omitempty"`

	// OpOutput.
	Stream string `json:"stream,omitempty"`
	Data   []byte `json:"data,omitempty"`

	// OpResult.
	Result *RunResult `json:"result,omitempty"`
	// OpArtifact.
	Artifact *Artifact `json:"artifact,omitempty"`

	// File operations.
	Path    string     `json:"path,omitempty"`
	Content []byte     `json:"content,omitempty"`
	Mode    uint32     `json:"mode,omitempty"`
	Entries []FileInfo `json:"entries,omitempty"`

	// OpStats.
	Stats *Stats `json:"stats,omitempty"`

	// OpEgress.
	CA   []byte `json:"ca,omitempty"`
	Port int    `json:"port,omitempty"`
	// Tunnel frames: the stream, and for OpConnAck the bytes consumed (data travels in Data).
	Conn uint64 `json:"conn,omitempty"`
	Ack  int64  `json:"ack,omitempty"`

	// OpSpawn; OpStdin's Close; OpExit's ExitCode and Status.
	Spawn    *SpawnRequest `json:"spawn,omitempty"`
	Close    bool          `json:"close,omitempty"`
	ExitCode int           `json:"exit_code,omitempty"`
	Status   string        `json:"status,omitempty"`

	// OpError.
	Error *Error `json:"error,omitempty"`
}

// SpawnRequest is a child process to start (OpSpawn).
type SpawnRequest struct {
	// Argv is the command line; Argv[0] is looked up on PATH.
	Argv []string `json:"argv"`
	// Env is laid over the sandbox's base environment.
	Env map[string]string `json:"env,omitempty"`
	// StderrBytes caps what is sent of its stderr (the rest is dropped); stdout is never capped.
	StderrBytes int64 `json:"stderr_bytes,omitempty"`
	// HostStdio (a guest with FeatureHostStdio) makes the child's stdin and stdout the host
	// pipes HostStdinFD and HostStdoutFD instead of OpStdin and OpOutput frames; its stderr and
	// its exit still come as frames. Only one child of a sandbox can have them.
	HostStdio bool `json:"host_stdio,omitempty"`
}

// RunRequest is one cell to run.
type RunRequest struct {
	Code  string            `json:"code"`
	Files []sandbox.File    `json:"files,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// Session: the cell is one of a session's turns (tracebacks name it "<run-N>"); otherwise the
	// sandbox serves one run and the code runs as "<string>".
	Session bool `json:"session,omitempty"`
	// Timeout is the cell's wall-clock budget: at it the guest interrupts the cell, Grace later it
	// restarts the Python process. Zero: no limit in the guest (the daemon's own deadline rules).
	Timeout time.Duration `json:"timeout,omitempty"`
	Grace   time.Duration `json:"grace,omitempty"`
	// StdoutBytes and StderrBytes cap what is sent of each stream; the rest is dropped.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// FilesBytes caps the content of changed files returned in the result.
	FilesBytes int64 `json:"files_bytes"`
	// ForkAfter (a session's cell whose step the daemon snapshots): right after sending the
	// result, the agent has the Python process fork the step's snapshot, and the next
	// OpSnapshot takes that fork instead of asking for one, saving the request's trip (snaps.go).
	// A run or rewind before any OpSnapshot drops it.
	ForkAfter bool `json:"fork_after,omitempty"`
	// SnapAfter (FeatureStepSnapshots; a session's cell whose step the daemon snapshots): the
	// step's snapshot rides on the run. Right after sending the result, before it serves any
	// other request, the agent takes snapshot SnapAfter.Snap as OpSnapshot would, and answers
	// request SnapAfter.ID (an ID the daemon reserved, no frame of its own) with OpSnapshot or
	// OpError. A run that ends without a result (refused) answers it with OpError too, so the
	// daemon's reserved request always ends. It saves the snapshot request's way into the
	// sandbox, and the snapshot begins as the result leaves instead of when the daemon asks.
	SnapAfter *SnapAfter `json:"snap_after,omitempty"`
	// StreamArtifacts asks for each artifact as an OpArtifact frame as soon as it is made.
	StreamArtifacts bool `json:"stream_artifacts,omitempty"`
	// The code context to run in, as sandbox.RunRequest has them (FeatureContexts). ContextDir
	// is absolute. The guest keeps at most sandbox.MaxContexts contexts besides the main one and
	// answers a run that would make one more with OpError (KindConflict).
	Context      string `json:"context,omitempty"`
	ContextDir   string `json:"context_dir,omitempty"`
	ContextReset bool   `json:"context_reset,omitempty"`
	ContextEnd   bool   `json:"context_end,omitempty"`
}

// SnapAfter is the snapshot a run takes behind its result (RunRequest.SnapAfter).
type SnapAfter struct {
	ID       uint64 `json:"id"`
	Snap     uint64 `json:"snap"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
}

// RunResult ends a run.
type RunResult struct {
	ExitCode        int              `json:"exit_code"`
	Error           *sandbox.PyError `json:"error,omitempty"`
	StdoutTruncated bool             `json:"stdout_truncated,omitempty"`
	StderrTruncated bool             `json:"stderr_truncated,omitempty"`
	// Files the cell created or changed under the work directory.
	Files []sandbox.File `json:"files,omitempty"`
	// Artifacts the cell produced (its matplotlib figures, as PNG), in order.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Outputs are the rich values the cell displayed: the value of its last expression.
	Outputs []sandbox.Output `json:"outputs,omitempty"`
	// FilesTruncated: more files changed than FilesBytes allowed to return.
	FilesTruncated bool `json:"files_truncated,omitempty"`
	// TimedOut: the guest interrupted the cell at its timeout.
	TimedOut bool `json:"timed_out,omitempty"`
	// Interrupted: the cell was ended by OpInterrupt.
	Interrupted bool `json:"interrupted,omitempty"`
	// StateLost: the Python process had to be killed and was restarted; the session's variables
	// and imports are gone (its files are kept).
	StateLost bool `json:"state_lost,omitempty"`
	// Elapsed is the cell's wall time inside the guest.
	Elapsed time.Duration `json:"elapsed"`
	// CPU is the CPU time the Python process (and children it waited for) used during the cell.
	CPU time.Duration `json:"cpu"`
}

// SnapInfo describes a snapshot the guest took.
type SnapInfo struct {
	// Fork is how long the Python process took to fork; FilesTime how long the files took.
	Fork      time.Duration `json:"fork"`
	FilesTime time.Duration `json:"files_time"`
	// Queued is how long the request waited in the agent's queue behind earlier requests;
	// Took how long the agent took from taking it up to its answer (the rest of what the
	// daemon measures is the way to the sandbox and back).
	Queued time.Duration `json:"queued,omitempty"`
	Took   time.Duration `json:"took,omitempty"`
	// Files is how many files the snapshot holds; NewBytes the bytes it copied (files changed
	// since the last snapshot or rewind), the rest being earlier snapshots' copies, shared.
	Files    int   `json:"files"`
	NewBytes int64 `json:"new_bytes"`
	// Looked is how many paths the snapshot looked at (stat, compare): those whose change the
	// agent was told of since the last snapshot or rewind, or every one when it walked them all.
	Looked int `json:"looked,omitempty"`
	// MapsRead says the snapshot read /proc for files mapped shared and writable (skipped while
	// the agent's watch knows no process holds a file of the session's directories open).
	MapsRead bool `json:"maps_read,omitempty"`
	// Threads counts the threads the code left running when the process forked: a fork copies
	// the calling thread only, so a rewind to this snapshot brings back none of them.
	Threads int `json:"threads,omitempty"`
}

// Artifact is one artifact of a run as the guest sends it. The daemon works out its size and hash
// itself.
type Artifact struct {
	Name    string `json:"name"`
	MIME    string `json:"mime"`
	Content []byte `json:"content"`
	// Chart is what a figure shows, read from its axes (sandbox.Artifact.Chart): JSON of at most
	// MaxChartBytes, or nil.
	Chart json.RawMessage `json:"chart,omitempty"`
}

// FileInfo is one entry of OpFiles.
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Dir  bool   `json:"dir,omitempty"`
	// Link: the entry is a symbolic link (Size is its target's length); listings do not follow
	// links.
	Link    bool      `json:"link,omitempty"`
	ModTime time.Time `json:"mod_time"`
}

// Stats is the sandbox's resource use as the guest sees it.
type Stats struct {
	// PythonRSS and PythonPeakRSS are the Python process's resident memory now and at its peak.
	PythonRSS     int64 `json:"python_rss"`
	PythonPeakRSS int64 `json:"python_peak_rss"`
	// CPU is the Python process's total CPU time.
	CPU time.Duration `json:"cpu"`
	// Processes is the number of processes in the sandbox, the guest included.
	Processes int `json:"processes"`
	// Runs is the number of cells run; Restarts how often the Python process was restarted.
	Runs     int `json:"runs"`
	Restarts int `json:"restarts"`
}

// Error is a failure of a request, as it crosses the sandbox boundary.
type Error struct {
	Kind    sandbox.Kind `json:"kind"`
	Message string       `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// ErrFrameTooLarge is returned for a frame above MaxFrame.
var ErrFrameTooLarge = errors.New("proto: frame too large")

// Write writes f as one frame. Concurrent writers must serialise.
func Write(w io.Writer, f *Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if len(b) > MaxFrame {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, len(b))
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// Read reads one frame, refusing one larger than max bytes (MaxFrame if max <= 0). It returns
// io.EOF at a clean end between frames and io.ErrUnexpectedEOF inside one.
func Read(r io.Reader, f *Frame, max int) error {
	if max <= 0 {
		max = MaxFrame
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(max) {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	*f = Frame{}
	if err := json.Unmarshal(b, f); err != nil {
		return fmt.Errorf("proto: bad frame: %w", err)
	}
	if f.Op == "" {
		return errors.New("proto: bad frame: no op")
	}
	return nil
}

// TunnelFrame turns a tunnel frame into a protocol frame.
func TunnelFrame(f tunnel.Frame) *Frame {
	out := &Frame{Conn: f.Stream}
	switch f.Kind {
	case tunnel.KindOpen:
		out.Op = OpConnOpen
	case tunnel.KindData:
		out.Op, out.Data = OpConnData, f.Data
	case tunnel.KindAck:
		out.Op, out.Ack = OpConnAck, f.Ack
	case tunnel.KindClose:
		out.Op = OpConnClose
	}
	return out
}

// AsTunnel returns the tunnel frame a protocol frame carries, or false for other frames.
func (f *Frame) AsTunnel() (tunnel.Frame, bool) {
	t := tunnel.Frame{Stream: f.Conn}
	switch f.Op {
	case OpConnOpen:
		t.Kind = tunnel.KindOpen
	case OpConnData:
		t.Kind, t.Data = tunnel.KindData, f.Data
	case OpConnAck:
		t.Kind, t.Ack = tunnel.KindAck, f.Ack
	case OpConnClose:
		t.Kind = tunnel.KindClose
	default:
		return t, false
	}
	return t, true
}
