package envd

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// process.Process onto agentbox's commands in the session: a process is a command started in the
// background (so it outlives the request that started it, as envd's do), streamed to the
// client while the client stays, followed again by Connect, fed by SendInput and ended by
// SendSignal. Its pid is derived from the command's id (pidOf), so nothing is kept here: a
// process is found by listing the session's commands.

func (h *Handler) serveProcess(w http.ResponseWriter, r *http.Request, t Target, method string) {
	switch method {
	case "Start":
		h.start(w, r, t)
	case "Connect":
		h.connect(w, r, t)
	case "List":
		h.list(w, r, t)
	case "SendInput":
		h.sendInput(w, r, t)
	case "StreamInput":
		h.streamInput(w, r, t)
	case "CloseStdin":
		h.closeStdin(w, r, t)
	case "SendSignal":
		h.sendSignal(w, r, t)
	case "Update":
		_ = readUnary(r, &updateRequest{})
		writeUnaryError(w, notImplemented("process.Process/Update", "agentbox's processes have no pseudo-terminal to resize (Sandbox.pty is not served)"))
	default:
		writeUnaryError(w, notImplemented("process.Process/"+method, "no such call in envd's process service"))
	}
}

// pidOf is the pid a command shows the SDK: 31 bits of its random id, never 0.
func pidOf(cid string) uint32 {
	hex := strings.TrimPrefix(cid, "cmd_")
	if len(hex) > 8 {
		hex = hex[:8]
	}
	n, _ := strconv.ParseUint(hex, 16, 32)
	if n &= 0x7fffffff; n == 0 {
		n = 1
	}
	return uint32(n)
}

// find returns the command a selector names: by the pid cache, else by listing the session's
// commands (each with its logs so far, so the cache spares SendInput that copy).
func (h *Handler) find(t Target, sel *processSelector) (sandbox.CommandInfo, error) {
	if sel == nil || (sel.Pid == nil && sel.Tag == nil) {
		return sandbox.CommandInfo{}, errorf(codeInvalidArgument, "the process selector is empty: give its pid")
	}
	if sel.Pid == nil {
		return sandbox.CommandInfo{}, errorf(codeNotFound, "no process has tag %q: agentbox does not keep process tags (select processes by pid)", *sel.Tag)
	}
	if cid, ok := h.pids.get(t.Session, *sel.Pid); ok {
		if c, err := t.Engine.CommandStatus(t.Session, cid); err == nil {
			return c, nil
		}
	}
	cs, err := t.Engine.Commands(t.Session)
	if err != nil {
		return sandbox.CommandInfo{}, err
	}
	for i := len(cs) - 1; i >= 0; i-- {
		if pidOf(cs[i].ID) == *sel.Pid {
			h.pids.put(t.Session, cs[i].ID)
			return cs[i], nil
		}
	}
	return sandbox.CommandInfo{}, errorf(codeNotFound, "process with pid %d not found in sandbox", *sel.Pid)
}

// pidCache remembers which command a pid of a session is. It is only a cache (a miss lists the
// session's commands), bounded by starting over when full.
type pidCache struct {
	mu sync.Mutex
	m  map[string]string
}

const maxPids = 8192

func pidKey(session string, pid uint32) string {
	return session + "/" + strconv.FormatUint(uint64(pid), 10)
}

func (c *pidCache) get(session string, pid uint32) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cid, ok := c.m[pidKey(session, pid)]
	return cid, ok
}

func (c *pidCache) put(session, cid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxPids {
		c.m = map[string]string{}
	}
	c.m[pidKey(session, pidOf(cid))] = cid
}

// findRunning is find for a process that must still run.
func (h *Handler) findRunning(t Target, sel *processSelector) (sandbox.CommandInfo, error) {
	c, err := h.find(t, sel)
	if err == nil && c.Status != sandbox.CommandRunning {
		err = errorf(codeNotFound, "process with pid %d has ended (%s)", pidOf(c.ID), c.Status)
	}
	return c, err
}

// queue is a command's output waiting for the client: the command's sink, which never blocks
// (what a command keeps is bounded by the session's output caps).
type queue struct {
	mu     sync.Mutex
	chunks []chunk
	wake   chan struct{}
}

type chunk struct {
	stream sandbox.Stream
	data   []byte
}

func newQueue() *queue { return &queue{wake: make(chan struct{}, 1)} }

func (q *queue) Write(s sandbox.Stream, p []byte) {
	q.mu.Lock()
	q.chunks = append(q.chunks, chunk{s, append([]byte(nil), p...)})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) take() []chunk {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.chunks
	q.chunks = nil
	return c
}

// skip drops the first n[0] bytes of stdout and n[1] of stderr from what is queued.
func (q *queue) skip(n [2]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.chunks[:0]
	for _, c := range q.chunks {
		i := 0
		if c.stream == sandbox.StreamStderr {
			i = 1
		}
		d := min(n[i], len(c.data))
		n[i] -= d
		if c.data = c.data[d:]; len(c.data) > 0 {
			out = append(out, c)
		}
	}
	q.chunks = out
}

func (h *Handler) start(w http.ResponseWriter, r *http.Request, t Target) {
	var req startRequest
	err := readStreamRequest(r, &req)
	if err == nil {
		err = checkUser(userOf(r))
	}
	if err == nil && len(req.Pty) > 0 && string(req.Pty) != "null" {
		err = notImplemented("process.Process/Start with a pty (Sandbox.pty.create)", "agentbox's commands have pipes, not a pseudo-terminal; use commands.run")
	}
	if err == nil && (req.Process == nil || req.Process.Cmd == "") {
		err = errorf(codeInvalidArgument, "the process to start has no cmd")
	}
	if err != nil {
		newStream(w).end(err)
		return
	}
	c := sandbox.Command{Argv: append([]string{req.Process.Cmd}, req.Process.Args...), Env: req.Process.Envs,
		OpenStdin: req.Stdin != nil && *req.Stdin, Background: true, Timeout: processTimeout(r, t.Engine.Policy())}
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		c.Dir = resolve(*req.Process.Cwd)
	}
	info, err := t.Engine.RunCommand(r.Context(), t.Session, c, nil)
	if err != nil && timeoutOf(r) == 0 && tenantRefusedTimeout(err) {
		// The server's maximum is above the tenant's: no timeout asked, the session's own.
		c.Timeout = 0
		info, err = t.Engine.RunCommand(r.Context(), t.Session, c, nil)
	}
	if err != nil {
		newStream(w).end(err)
		return
	}
	h.pids.put(t.Session, info.ID)
	h.follow(w, r, t, info.ID, false)
}

// processTimeout is how long a process may run: the SDK's timeoutMs (Connect-Timeout-Ms; envd
// kills the process then), within the server's maximum. No timeout (timeoutMs 0, a long-running
// server) or one above the maximum gets the maximum: agentbox has no process without a bound.
func processTimeout(r *http.Request, p sandbox.Policy) time.Duration {
	d, max := timeoutOf(r), p.Max.Timeout
	if max > 0 && (d == 0 || d > max) {
		return max
	}
	return d
}

// tenantRefusedTimeout says whether err is the refusal of a timeout above the tenant's maximum.
func tenantRefusedTimeout(err error) bool {
	e := sandbox.AsError(err)
	return e != nil && e.Kind == sandbox.KindInvalidRequest && strings.HasPrefix(e.Message, "timeout ") && strings.Contains(e.Message, "tenant")
}

func (h *Handler) connect(w http.ResponseWriter, r *http.Request, t Target) {
	var req connectRequest
	err := readStreamRequest(r, &req)
	var info sandbox.CommandInfo
	if err == nil {
		info, err = h.find(t, req.Process)
	}
	if err != nil {
		newStream(w).end(err)
		return
	}
	h.follow(w, r, t, info.ID, true)
}

// follow streams command cid to the client: its start, its output (from its first byte, or from
// now when attaching to a running one), its end; keepalives while it is quiet. The client
// leaving does not end the command.
func (h *Handler) follow(w http.ResponseWriter, r *http.Request, t Target, cid string, fromNow bool) {
	q := newQueue()
	info, done, leave, err := t.Engine.FollowCommand(t.Session, cid, q)
	if err != nil {
		newStream(w).end(err)
		return
	}
	defer leave()
	if fromNow {
		q.skip([2]int{len(info.Stdout), len(info.Stderr)})
	}
	s := newStream(w)
	if err := s.send(processResponse{Event: processEvent{Start: &startEvent{Pid: pidOf(cid)}}}); err != nil {
		return
	}
	flush := func() error {
		for _, c := range q.take() {
			d := &dataEvent{}
			if c.stream == sandbox.StreamStderr {
				d.Stderr = c.data
			} else {
				d.Stdout = c.data
			}
			if err := s.send(processResponse{Event: processEvent{Data: d}}); err != nil {
				return err
			}
		}
		return nil
	}
	keepalive := keepaliveOf(r)
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case <-q.wake:
			if flush() != nil {
				return
			}
			tick.Reset(keepalive)
		case <-tick.C:
			if s.send(processResponse{Event: processEvent{Keepalive: &struct{}{}}}) != nil {
				return
			}
		case <-done:
			if flush() != nil {
				return
			}
			end, err := t.Engine.CommandStatus(t.Session, cid)
			if err != nil {
				s.end(err)
				return
			}
			if s.send(processResponse{Event: processEvent{End: endOf(end)}}) == nil {
				s.end(nil)
			}
			return
		case <-r.Context().Done():
			return // the client left: the process goes on (Connect finds it again)
		}
	}
}

// endOf is envd's end event for an ended command, as Go's os/exec describes a process state
// (envd's words): "exit status 3", or "signal: killed" with exit code -1.
func endOf(c sandbox.CommandInfo) *endEvent {
	e := &endEvent{ExitCode: int32(c.ExitCode), Exited: c.Status == sandbox.CommandExited}
	switch c.Status {
	case sandbox.CommandExited:
		e.Status = "exit status " + strconv.Itoa(c.ExitCode)
	case sandbox.CommandKilled:
		e.ExitCode, e.Status = -1, "signal: killed"
	case sandbox.CommandTimeout:
		e.ExitCode, e.Status = -1, "signal: killed (agentbox: the command's timeout passed)"
	default:
		e.ExitCode, e.Status = -1, "agentbox: the command failed: "+c.Error
	}
	if e.ExitCode != 0 {
		msg := e.Status
		e.Error = &msg
	}
	return e
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, t Target) {
	if err := readUnary(r, &struct{}{}); err != nil {
		writeUnaryError(w, err)
		return
	}
	cs, err := t.Engine.Commands(t.Session)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	out := listResponse{Processes: []processInfo{}}
	for _, c := range cs {
		if c.Status != sandbox.CommandRunning || len(c.Argv) == 0 {
			continue
		}
		dir := c.Dir
		out.Processes = append(out.Processes, processInfo{Pid: pidOf(c.ID),
			Config: processConfig{Cmd: c.Argv[0], Args: c.Argv[1:], Cwd: &dir}})
	}
	writeUnary(w, out)
}

func (h *Handler) sendInput(w http.ResponseWriter, r *http.Request, t Target) {
	var req sendInputRequest
	err := readUnary(r, &req)
	if err == nil {
		err = h.input(t, req.Process, req.Input)
	}
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

// input feeds a process's stdin.
func (h *Handler) input(t Target, sel *processSelector, in *processInput) error {
	if in != nil && len(in.Pty) > 0 {
		return notImplemented("process.Process/SendInput to a pty", "agentbox's commands have no pseudo-terminal")
	}
	c, err := h.findRunning(t, sel)
	if err != nil {
		return err
	}
	if in == nil || len(in.Stdin) == 0 {
		return nil
	}
	return t.Engine.WriteCommandStdin(t.Session, c.ID, in.Stdin)
}

// streamInput is the client-streaming form of SendInput: a start naming the process, then
// data. (The JS SDK does not use it: fetch cannot stream a request body both ways.)
// maxStreamInput bounds the bytes of one StreamInput request.
const maxStreamInput = 16 * maxMessage

func (h *Handler) streamInput(w http.ResponseWriter, r *http.Request, t Target) {
	var sel *processSelector
	// The stream may carry up to maxStreamInput bytes; one byte more fails the call instead of
	// ending it as if the client had finished.
	body := &io.LimitedReader{R: r.Body, N: maxStreamInput + 1}
	var err error
	for {
		var b []byte
		if _, b, err = readEnvelope(body); err != nil {
			break
		}
		var m streamInputRequest
		if err = json.Unmarshal(b, &m); err != nil {
			err = errorf(codeInvalidArgument, "a StreamInput message is not JSON: %v", err)
			break
		}
		switch {
		case m.Start != nil:
			sel = m.Start.Process
		case m.Data != nil:
			if sel == nil {
				err = errorf(codeInvalidArgument, "StreamInput sent data before its start event named the process")
			} else {
				err = h.input(t, sel, m.Data.Input)
			}
		}
		if err != nil {
			break
		}
	}
	if body.N == 0 {
		err = errorf(codeResourceExhausted, "a StreamInput request is over %d bytes; send the rest in another request", maxStreamInput)
	}
	s := newStream(w)
	if err == io.EOF {
		if s.send(struct{}{}) == nil {
			s.end(nil)
		}
		return
	}
	s.end(err)
}

func (h *Handler) closeStdin(w http.ResponseWriter, r *http.Request, t Target) {
	var req closeStdinRequest
	err := readUnary(r, &req)
	var c sandbox.CommandInfo
	if err == nil {
		c, err = h.findRunning(t, req.Process)
	}
	if err == nil {
		err = t.Engine.CloseCommandStdin(t.Session, c.ID)
	}
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

// sendSignal ends the process: SIGKILL and SIGTERM both kill its process group (agentbox's kill;
// a process gets no chance to catch SIGTERM).
func (h *Handler) sendSignal(w http.ResponseWriter, r *http.Request, t Target) {
	var req sendSignalRequest
	err := readUnary(r, &req)
	sig := req.Signal
	if err == nil && !(sig.Number == sigKill || sig.Number == sigTerm || sig.Name == "SIGNAL_SIGKILL" || sig.Name == "SIGNAL_SIGTERM") {
		err = errorf(codeInvalidArgument, "signal %q%d is not SIGTERM or SIGKILL", sig.Name, sig.Number)
	}
	var c sandbox.CommandInfo
	if err == nil {
		c, err = h.findRunning(t, req.Process)
	}
	if err == nil {
		_, err = t.Engine.KillCommand(t.Session, c.ID)
	}
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

// Interface guards
var _ sandbox.OutputSink = (*queue)(nil)
