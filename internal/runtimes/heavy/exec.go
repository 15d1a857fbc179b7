package heavy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// capture keeps a run's output up to its caps. The guest caps too; the daemon does not trust it.
type capture struct {
	mu        sync.Mutex
	buf       [2]strings.Builder
	limit     [2]int64
	truncated [2]bool
	// out, when set, gets what is kept as it comes (the run's sink).
	out sandbox.OutputSink
}

func (c *capture) write(stream string, data []byte) {
	i := 0
	if stream == proto.Stderr {
		i = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit[i] - int64(c.buf[i].Len()); int64(len(data)) > room {
		data = data[:max(0, room)]
		c.truncated[i] = true
	}
	c.buf[i].Write(data)
	if c.out != nil && len(data) > 0 {
		// The guest sends each chunk as the interpreter writes it (line-buffered pipes): pass
		// it on as it comes. Under c.mu, so chunks keep their order.
		c.out.Write([2]sandbox.Stream{sandbox.StreamStdout, sandbox.StreamStderr}[i], data)
	}
}

func (c *capture) fill(res *sandbox.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Stdout, res.Stderr = c.buf[0].String(), c.buf[1].String()
	res.StdoutTruncated = res.StdoutTruncated || c.truncated[0]
	res.StderrTruncated = res.StderrTruncated || c.truncated[1]
}

// runOutcome says what a run left of its sandbox.
type runOutcome int

const (
	boxIntact runOutcome = iota // the sandbox can take the next run (its state may be lost: see the result)
	boxBroken                   // the sandbox is gone or must be destroyed
)

// traceRun, when set (by a measuring test), is told of every run's answer: when its frame was
// sent, when the answer came, and the guest's result (the cell's time and CPU inside the guest).
var traceRun func(b *box, sent, answered time.Time, r *proto.RunResult)

// run runs one request in b. A one-shot run (session false) is stopped at its deadline without
// waiting for the guest: the caller destroys the sandbox anyway. A session run gets the guest's
// interrupt first, so the session survives a timeout.
//
// snap, when set, is the step's snapshot the guest takes right behind the result
// (proto.RunRequest.SnapAfter); once the run's frame is sent, snap.call is where its answer comes.
func (b *box) run(ctx context.Context, req *sandbox.RunRequest, session bool, grace time.Duration, snap *stepSnap) (*sandbox.Result, runOutcome, error) {
	l := req.Limits
	cap := &capture{limit: [2]int64{l.StdoutBytes, l.StderrBytes}, out: req.Output}
	res := &sandbox.Result{Runtime: Tier}
	files := make([]sandbox.File, len(req.Files))
	for i, f := range req.Files {
		p, err := sandbox.CleanPath(f.Path)
		if err != nil {
			return nil, boxIntact, err
		}
		files[i] = sandbox.File{Path: p, Content: f.Content}
	}
	ctxDir := ""
	if req.Context != "" || req.ContextReset {
		if !b.can(proto.FeatureContexts) {
			return nil, boxIntact, sandbox.Errorf(sandbox.KindNotImplemented, "this sandbox's image has a guest agent without code contexts").
				WithHint("rebuild the image with this agentbox (agentbox setup; agentbox image build NAME)")
		}
		if req.ContextDir != "" {
			p, err := sandbox.CleanPath(req.ContextDir)
			if err != nil {
				return nil, boxIntact, err
			}
			ctxDir = p
		}
	}
	oom0 := b.cg.oomKills()
	f := &proto.Frame{Op: proto.OpRun, Run: &proto.RunRequest{
		Code:        req.Code,
		Files:       files,
		Env:         b.envFor(req.Env),
		Session:     session,
		ForkAfter:   session && b.forkAfter,
		Timeout:     l.Timeout,
		Grace:       grace,
		StdoutBytes: l.StdoutBytes,
		StderrBytes: l.StderrBytes,
		FilesBytes:  l.FilesBytes,
		// Code contexts (sandbox/contexts.go), kept by the guest's REPL.
		Context:      req.Context,
		ContextDir:   ctxDir,
		ContextReset: req.ContextReset,
		ContextEnd:   req.ContextEnd,
	}}
	start := time.Now()
	cl := &call{output: cap.write}
	if as, ok := req.Output.(sandbox.ArtifactSink); ok {
		// Each figure as soon as it is drawn; the result lists them all again.
		f.Run.StreamArtifacts = true
		cl.artifact = func(a proto.Artifact) {
			for _, x := range artifacts([]proto.Artifact{a}) {
				as.Artifact(x)
			}
		}
	}
	var sc *call
	if snap != nil {
		sc = &call{}
		id, err := b.register(sc)
		if err != nil {
			return nil, boxBroken, err
		}
		f.Run.SnapAfter = &proto.SnapAfter{ID: id, Snap: snap.snap, MaxBytes: snap.maxBytes}
		f.Run.ForkAfter = false
	}
	c, err := b.sendCall(f, cl)
	if err != nil {
		if f.Run.SnapAfter != nil {
			b.unregister(f.Run.SnapAfter.ID)
		}
		return nil, boxBroken, err
	}
	if snap != nil {
		snap.call = sc
	}
	// The guest interrupts the cell at the timeout and answers at once; the daemon's deadline is a
	// backstop for code that does not take the interrupt (stuck in C, signals ignored).
	backstop := l.Timeout + 50*time.Millisecond
	if session {
		backstop = l.Timeout + grace + 2*time.Second
	}
	timer := time.NewTimer(backstop)
	defer timer.Stop()
	finish := func() {
		res.Timing.Execute = time.Since(start)
		cap.fill(res)
	}
	select {
	case ans, ok := <-c.answer:
		finish()
		if !ok {
			if b.cg.oomKills() > oom0 {
				return nil, boxBroken, memoryErr(res, l, session, true)
			}
			return nil, boxBroken, b.deadErr()
		}
		if ans.Op == proto.OpError && ans.Error != nil {
			return nil, boxIntact, &sandbox.Error{Kind: ans.Error.Kind, Message: ans.Error.Message}
		}
		r := ans.Result
		if ans.Op != proto.OpResult || r == nil {
			b.fail(fmt.Sprintf("answered a run with %s", ans.Op))
			return nil, boxBroken, sandbox.Errorf(sandbox.KindInternal, "the heavy guest answered a run with %q", ans.Op)
		}
		if traceRun != nil {
			traceRun(b, start, time.Now(), r)
		}
		res.ExitCode = r.ExitCode
		res.Error = r.Error
		res.StdoutTruncated = res.StdoutTruncated || r.StdoutTruncated
		res.StderrTruncated = res.StderrTruncated || r.StderrTruncated
		res.Files = boundFiles(r.Files, l.FilesBytes)
		res.Artifacts = artifacts(r.Artifacts)
		res.Outputs = proto.BoundOutputs(r.Outputs)
		switch {
		case r.TimedOut:
			res.Error, res.ExitCode = nil, -1
			return nil, boxIntact, timeoutErr(res, l, session, r.StateLost)
		case r.StateLost && b.cg.oomKills() > oom0:
			res.Error, res.ExitCode = nil, -1
			return nil, boxIntact, memoryErr(res, l, session, false)
		}
		return res, boxIntact, nil
	case <-timer.C:
		finish()
		res.ExitCode = -1
		return nil, boxBroken, timeoutErr(res, l, false, true)
	case <-ctx.Done():
		finish()
		res.ExitCode = -1
		return nil, boxBroken, (&sandbox.Error{Kind: sandbox.KindTimeout, Message: fmt.Sprintf("the request was cancelled: %v", ctx.Err()), Result: res})
	}
}

// stepSnap is a step's snapshot that rides on a session's run (proto.RunRequest.SnapAfter).
type stepSnap struct {
	snap     uint64 // the guest's snapshot id
	maxBytes int64
	call     *call // its answer, once the run's frame is sent
}

// boundFiles keeps the guest's files within the files cap.
func boundFiles(fs []sandbox.File, limit int64) []sandbox.File {
	var total int64
	out := fs[:0:0]
	for _, f := range fs {
		if limit > 0 && total+int64(len(f.Content)) > limit {
			continue
		}
		total += int64(len(f.Content))
		out = append(out, f)
	}
	return out
}

// artifacts checks the guest's artifacts again (well formed, within proto.MaxArtifacts and
// proto.MaxArtifactsBytes) and works out their sizes and hashes. IDs are the Manager's to give.
func artifacts(as []proto.Artifact) []sandbox.Artifact {
	var checked proto.RunResult
	for _, a := range as {
		checked.AddArtifact(a)
	}
	var out []sandbox.Artifact
	for _, a := range checked.Artifacts {
		sum := sha256.Sum256(a.Content)
		out = append(out, sandbox.Artifact{
			Name:    a.Name,
			MIME:    a.MIME,
			Size:    int64(len(a.Content)),
			SHA256:  hex.EncodeToString(sum[:]),
			Content: a.Content,
			Chart:   a.Chart,
		})
	}
	return out
}

func timeoutErr(res *sandbox.Result, l sandbox.Limits, session, lost bool) error {
	msg := fmt.Sprintf("the code ran past its %v timeout and was stopped", l.Timeout)
	if session {
		if lost {
			msg += "; it did not take the interrupt, so the session's Python process was restarted: its variables and imports are gone (files are kept)"
		} else {
			msg += " with KeyboardInterrupt; the session's state is kept"
		}
	}
	return (&sandbox.Error{Kind: sandbox.KindTimeout, Message: msg, Result: res}).
		WithHint("raise timeout (the server allows up to its configured maximum) or make the code faster; output printed before the stop is in the result")
}

func memoryErr(res *sandbox.Result, l sandbox.Limits, session, sandboxLost bool) error {
	msg := fmt.Sprintf("the code used more than its %d MiB memory limit and was killed", l.MemoryBytes>>20)
	switch {
	case session && sandboxLost:
		msg += "; the whole sandbox was killed, so this session has ended"
	case session:
		msg += "; the session's Python process was restarted: its variables and imports are gone (files are kept)"
	}
	return (&sandbox.Error{Kind: sandbox.KindMemoryLimit, Message: msg, Result: res}).
		WithHint("raise memory (files written count toward it too) or process the data in smaller pieces")
}
