package interp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// POST /execute: the code interpreter's one call that runs code. The answer is NDJSON, one
// message a line, as the SDK parses them: number_of_executions first, then stdout and stderr as
// the code prints, results (figures as they are drawn, then the value of the last expression as
// the main result), an error if the code raised, and end_of_execution. Python runs as a run of
// the sandbox's agentbox session (its persistent interpreter: the default context) or of a
// context's session; "bash" runs in the context's persistent shell (bash.go). Every other
// language is answered with an error result naming it.

type executeRequest struct {
	Code      string            `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// normalize maps the SDK's language names as the code interpreter does.
func normalize(lang string) string {
	switch l := strings.ToLower(strings.TrimSpace(lang)); l {
	case "", "python", "python3", "py":
		return "python"
	case "js", "javascript", "ts", "typescript", "deno":
		return "javascript"
	case "sh", "bash", "shell":
		return "bash"
	default:
		return l
	}
}

// holdStderr is how long a stderr chunk waits before it is sent: long enough to see whether it
// is the traceback the interpreter echoes as the run ends (the code interpreter sends that only
// as the error), short enough not to matter to a person watching.
const holdStderr = 150 * time.Millisecond

func (h *Handler) execute(w http.ResponseWriter, r *http.Request, t Target) {
	var req executeRequest
	if err := decode(r, &req); err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	if req.ContextID != nil && *req.ContextID != "" && req.Language != nil && *req.Language != "" {
		http.Error(w, "Only one of context_id or language can be provided", http.StatusBadRequest)
		return
	}
	c, lang := &codeContext{ID: defaultContext}, "python"
	if req.Language != nil {
		lang = normalize(*req.Language)
	}
	if req.ContextID != nil && *req.ContextID != "" {
		var ok bool
		if c, ok = h.context(t, *req.ContextID); !ok {
			http.Error(w, fmt.Sprintf("Context %s not found", *req.ContextID), http.StatusNotFound)
			return
		}
		lang = c.Language
	}
	out := newLines(w)
	out.send(map[string]any{"type": "number_of_executions", "execution_count": h.executionCount(t, c)})
	switch lang {
	case "python":
		h.runPython(r.Context(), out, t, c, req)
	case "bash":
		h.runBash(r.Context(), out, t, c, req)
	default:
		out.send(errorLine("NotImplementedError", fmt.Sprintf("agentbox does not implement the code interpreter's %q language: its sandboxes run Python and bash; run other languages with Sandbox.commands.run", lang), ""))
	}
	out.send(map[string]any{"type": "end_of_execution"})
}

// lines writes NDJSON, each line flushed.
type lines struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newLines(w http.ResponseWriter) *lines {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	return &lines{w: w, rc: http.NewResponseController(w)}
}

func (l *lines) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
	_ = l.rc.Flush()
}

func errorLine(name, value, traceback string) map[string]any {
	return map[string]any{"type": "error", "name": name, "value": value, "traceback": traceback}
}

func streamLine(stream sandbox.Stream, text string) map[string]any {
	return map[string]any{"type": string(stream), "text": text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)}
}

// sink is a run's OutputSink and ArtifactSink: it queues what the run makes for the request's
// goroutine, never blocking the runtime (what a run makes is bounded by its caps).
type sink struct {
	mu    sync.Mutex
	items []item
	wake  chan struct{}
}

type item struct {
	stream   sandbox.Stream
	data     []byte
	artifact *sandbox.Artifact
}

func newSink() *sink { return &sink{wake: make(chan struct{}, 1)} }

func (s *sink) push(it item) {
	s.mu.Lock()
	s.items = append(s.items, it)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sink) Write(stream sandbox.Stream, p []byte) {
	s.push(item{stream: stream, data: append([]byte(nil), p...)})
}

func (s *sink) Artifact(a sandbox.Artifact) { s.push(item{artifact: &a}) }

func (s *sink) take() []item {
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.items
	s.items = nil
	return it
}

// relay sends a run's output as it comes until the run is done, then what is left.
type relay struct {
	out  *lines
	eng  Engine
	sent map[string]bool // artifacts sent, by id
	held strings.Builder // stderr waiting (holdStderr)
}

func newRelay(out *lines, eng Engine) *relay {
	return &relay{out: out, eng: eng, sent: map[string]bool{}}
}

func (rl *relay) flushHeld() {
	if rl.held.Len() > 0 {
		rl.out.send(streamLine(sandbox.StreamStderr, rl.held.String()))
		rl.held.Reset()
	}
}

func (rl *relay) items(its []item) (heldNow bool) {
	for _, it := range its {
		switch {
		case it.artifact != nil:
			rl.flushHeld()
			rl.artifact(*it.artifact)
		case it.stream == sandbox.StreamStderr:
			rl.held.Write(it.data)
			heldNow = true
		default:
			rl.flushHeld()
			rl.out.send(streamLine(sandbox.StreamStdout, string(it.data)))
		}
	}
	return heldNow
}

// artifact sends a figure as a display result, as the code interpreter sends a shown figure: its
// picture, and what it shows (its chart).
func (rl *relay) artifact(a sandbox.Artifact) {
	if rl.sent[a.ID] || a.ID == "" {
		return
	}
	rl.sent[a.ID] = true
	key := map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/svg+xml": "svg"}[a.MIME]
	if key == "" {
		return
	}
	b, err := rl.read(a)
	if err != nil {
		rl.out.send(streamLine(sandbox.StreamStderr, fmt.Sprintf("agentbox: figure %s could not be read: %v\n", a.ID, err)))
		return
	}
	v := base64.StdEncoding.EncodeToString(b)
	if key == "svg" {
		v = string(b)
	}
	r := map[string]any{"type": "result", key: v, "text": fmt.Sprintf("<Figure %s>", a.Name), "is_main_result": false}
	if len(a.Chart) > 0 && json.Valid(a.Chart) {
		r["chart"] = a.Chart
	}
	rl.out.send(r)
}

// read returns an artifact's bytes.
func (rl *relay) read(a sandbox.Artifact) ([]byte, error) {
	_, rc, err := rl.eng.Artifact(a.ID)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// finish sends the rest of a run: the held stderr less the traceback the error carries, the
// figures not yet sent, the main result, the error.
func (rl *relay) finish(res *sandbox.Result, err error) {
	if res == nil {
		if e := sandbox.AsError(err); e != nil {
			res = e.Result
		}
	}
	if res != nil && res.Error != nil && res.Error.Traceback != "" {
		held := strings.TrimSuffix(rl.held.String(), res.Error.Traceback)
		rl.held.Reset()
		rl.held.WriteString(held)
	}
	rl.flushHeld()
	if res != nil {
		for _, a := range res.Artifacts {
			rl.artifact(a)
		}
		if len(res.Outputs) > 0 {
			rl.out.send(mainResult(res.Outputs[0]))
		}
		if res.Error != nil {
			rl.out.send(errorLine(res.Error.Name, res.Error.Value, res.Error.Traceback))
		}
	}
	if err != nil {
		rl.out.send(runErrorLine(err))
	}
}

// runErrorLine is an error of agentbox's (the run's timeout, its memory cap, the sandbox ending)
// as the code interpreter's error message.
func runErrorLine(err error) map[string]any {
	name := "SandboxError"
	switch sandbox.KindOf(err) {
	case sandbox.KindTimeout:
		name = "TimeoutError"
	case sandbox.KindMemoryLimit:
		name = "MemoryError"
	case sandbox.KindPolicyViolation, sandbox.KindForbidden:
		name = "PermissionError"
	case sandbox.KindNotImplemented:
		name = "NotImplementedError"
	}
	msg := err.Error()
	if e := sandbox.AsError(err); e != nil && e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	if sandbox.KindOf(err) == sandbox.KindInternal {
		// As agentbox's own API: a fault's text is for the daemon's log, not for the caller.
		slog.Error("e2b code interpreter: internal error", "err", err)
		msg = "internal error: the daemon's log has the details"
	}
	return errorLine(name, msg, "")
}

// run runs start, relaying its sink while it runs.
func (rl *relay) run(s *sink, start func() (*sandbox.Result, error)) {
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := start()
		done <- outcome{res, err}
	}()
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	for {
		select {
		case <-s.wake:
			if rl.items(s.take()) {
				hold.Reset(holdStderr)
			}
		case <-hold.C:
			rl.flushHeld()
		case o := <-done:
			hold.Stop()
			rl.items(s.take())
			rl.finish(o.res, o.err)
			return
		}
	}
}

// runPython runs the cell in context c of the sandbox's session (its variables, its cwd).
func (h *Handler) runPython(ctx context.Context, out *lines, t Target, c *codeContext, req executeRequest) {
	s := newSink()
	rl := newRelay(out, t.Engine)
	rl.run(s, func() (*sandbox.Result, error) {
		// A cell runs as long as the client waits for it (the SDK's timeoutMs, which it does not
		// send: it ends the request, and so the run), within the server's maximum, as E2B's
		// kernel has no limit of its own; not a run's short default. A tenant whose maximum is
		// lower gets the session's own timeout.
		run := &sandbox.RunRequest{Code: req.Code, Env: req.EnvVars, Output: s, Limits: sandbox.Limits{Timeout: t.Engine.Policy().Max.Timeout}}
		if c.name != "" {
			// Its cwd, should this run make it again (the first cell, or after a rewind to
			// before it was made).
			run.Context, run.ContextDir = c.name, c.Cwd
		}
		res, err := t.Engine.RunInSession(ctx, t.Session, run)
		if res == nil && tenantRefusedTimeout(err) {
			run.Limits = sandbox.Limits{}
			res, err = t.Engine.RunInSession(ctx, t.Session, run)
		}
		if ran(res, err) {
			h.counted(t, c, true)
		}
		return res, err
	})
}

// ran says whether a run's outcome is of code that ran (and so counts as a cell).
func ran(res *sandbox.Result, err error) bool {
	switch sandbox.KindOf(err) {
	case sandbox.KindTimeout, sandbox.KindMemoryLimit, sandbox.KindOutputLimit, sandbox.KindPolicyViolation:
		return true
	}
	return res != nil
}

// tenantRefusedTimeout says whether err is the refusal of a timeout above the tenant's maximum.
func tenantRefusedTimeout(err error) bool {
	e := sandbox.AsError(err)
	return e != nil && e.Kind == sandbox.KindInvalidRequest && strings.HasPrefix(e.Message, "timeout ") && strings.Contains(e.Message, "tenant")
}
