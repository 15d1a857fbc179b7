package sandbox

import (
	"sync"
	"unicode/utf8"
)

// Streaming. A run may carry an OutputSink (RunRequest.Output): the runtime hands it the code's
// stdout and stderr as the code writes them (nano: each write the guest makes, coalesced by the
// worker for at most a few milliseconds; heavy: each chunk the guest agent reads from the
// interpreter's pipes, which are line-buffered), besides keeping them for the result as before.
// The result stays the whole truth: a client that reads only the result loses nothing.
//
// The Manager wraps the caller's sink (streamer) so that every tier keeps the same promises:
//   - chunks never pass the run's output caps (Limits.StdoutBytes, StderrBytes), whatever a
//     runtime sends;
//   - a chunk never ends in the middle of a UTF-8 character (the rest waits for the next chunk);
//   - a run retried in another tier (an auto one-shot run that met what nano cannot give, or a
//     session that moved and ran the code again) does not deliver the same output twice: the
//     retry's output is compared with what the first try already delivered, and only what goes
//     beyond it is passed on. Code whose output before the failing point differs between tiers
//     (it printed the time) has its retry's output passed on from the first differing byte.
//   - the runs a session move replays carry no sink: their output was delivered when they first
//     ran.
//
// Backpressure is the sink's business and must not stall the runtime for long: the HTTP front
// door's sink keeps a bounded queue and, when the client does not keep up, drops chunks and
// tells the client how many bytes it dropped (they are in the final result).

// Stream names a standard stream of a run.
type Stream string

const (
	StreamStdout Stream = "stdout"
	StreamStderr Stream = "stderr"
)

// OutputSink receives a run's output as it is produced.
type OutputSink interface {
	// Write takes a chunk of stream. Calls are serialised by the Manager; p is not kept by the
	// runtime after the call. Write must not block for long: it runs on the goroutine that
	// carries the guest's output.
	Write(stream Stream, p []byte)
}

// ArtifactSink is an optional ability of an OutputSink: it takes the run's artifacts (its
// figures) as the run makes them, already stored (ID set, Content nil). A runtime that can tell
// an artifact before the run ends hands it to the request's sink when the sink has this ability;
// the result lists every artifact all the same.
type ArtifactSink interface {
	Artifact(a Artifact)
}

// SinkFunc adapts a function to OutputSink.
type SinkFunc func(stream Stream, p []byte)

func (f SinkFunc) Write(stream Stream, p []byte) { f(stream, p) }

// Emit hands p to the request's sink, if it has one. Runtimes call it for each chunk.
func (r *RunRequest) Emit(stream Stream, p []byte) {
	if r != nil && r.Output != nil && len(p) > 0 {
		r.Output.Write(stream, p)
	}
}

// streamer is the Manager's wrapper of a caller's sink: caps, whole characters, no repeats
// across retries.
type streamer struct {
	mu    sync.Mutex
	out   OutputSink
	limit [2]int64
	// sent is what this attempt passed on per stream (the caps count it); held is a partial
	// UTF-8 character waiting for its rest.
	sent [2]int64
	held [2][]byte
	// delivered counts what was passed on per stream, over every attempt. On a retry, prefix
	// is what the earlier attempt passed on (from its result) and skip how much of it the current
	// attempt has reproduced so far; its output is new from the first byte past the prefix, or
	// from the first byte that differs.
	delivered [2]int
	prefix    [2][]byte
	skip      [2]int
	// done: the run has returned; a late chunk (a reader goroutine of a sandbox that was
	// killed) is dropped.
	done bool
	// keep stores an artifact made during the run (the Manager's store, the tenant's quota);
	// stored are those it stored, by SHA-256, so that the result's copies are not stored twice.
	keep   func(a *Artifact) bool
	stored map[string]Artifact
}

// Artifact stores an artifact the run just made and passes it on (ArtifactSink).
func (s *streamer) Artifact(a Artifact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.keep == nil {
		return
	}
	if _, dup := s.stored[a.SHA256]; dup || a.SHA256 == "" {
		return
	}
	if !s.keep(&a) {
		return
	}
	if s.stored == nil {
		s.stored = map[string]Artifact{}
	}
	s.stored[a.SHA256] = a
	if as, ok := s.out.(ArtifactSink); ok {
		as.Artifact(a)
	}
}

// reuse replaces the artifacts of a result (and of an error's partial result) that were stored
// while the run ran by their stored descriptions, so the Manager keeps them once.
func (s *streamer) reuse(res *Result, err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range []*Result{res, resultOf(nil, err)} {
		if r == nil {
			continue
		}
		for i, a := range r.Artifacts {
			if k, ok := s.stored[a.SHA256]; ok && a.Content != nil {
				r.Artifacts[i] = k
			}
		}
	}
}

// newStreamer wraps out for a run with limits; nil when there is no sink.
func newStreamer(out OutputSink, l Limits) *streamer {
	if out == nil {
		return nil
	}
	return &streamer{out: out, limit: [2]int64{l.StdoutBytes, l.StderrBytes}}
}

func streamIndex(s Stream) int {
	if s == StreamStderr {
		return 1
	}
	return 0
}

// Write implements OutputSink.
func (s *streamer) Write(stream Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	i := streamIndex(stream)
	if s.limit[i] > 0 {
		room := s.limit[i] - s.sent[i]
		if room <= 0 {
			return
		}
		if int64(len(p)) > room {
			p = p[:room]
		}
	}
	s.sent[i] += int64(len(p))
	if len(s.held[i]) > 0 {
		p = append(s.held[i], p...)
		s.held[i] = nil
	}
	// Hold back a character cut at the end of the chunk.
	if cut := partialRuneTail(p); cut > 0 {
		s.held[i] = append([]byte(nil), p[len(p)-cut:]...)
		p = p[:len(p)-cut]
	}
	s.pass(i, stream, p)
}

// pass delivers p, less what an earlier attempt already delivered. The caller holds s.mu.
func (s *streamer) pass(i int, stream Stream, p []byte) {
	for s.skip[i] < s.delivered[i] && len(p) > 0 {
		if pre := s.prefix[i]; pre != nil && (s.skip[i] >= len(pre) || p[0] != pre[s.skip[i]]) {
			s.skip[i] = s.delivered[i] // diverged: from here on everything is new
			break
		}
		s.skip[i]++
		p = p[1:]
	}
	if len(p) == 0 {
		return
	}
	s.delivered[i] += len(p)
	s.skip[i] = s.delivered[i]
	s.out.Write(stream, p)
}

// retry starts another attempt of the same run; prev is the earlier attempt's result (or nil),
// whose streams hold what that attempt passed on: the new attempt's output is compared with it.
// Without prev, the new attempt's first bytes, as many as were delivered, are taken as repeats.
func (s *streamer) retry(prev *Result) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = [2]int64{}
	s.held = [2][]byte{}
	s.skip = [2]int{}
	s.prefix = [2][]byte{}
	if prev != nil {
		for i, out := range []string{prev.Stdout, prev.Stderr} {
			if len(out) >= s.delivered[i] {
				s.prefix[i] = []byte(out[:s.delivered[i]])
			}
		}
	}
}

// note tells the client, on stderr, something the daemon did to the run (a retry in another
// tier, after the first try's traceback was already streamed). It is not part of the result.
func (s *streamer) note(text string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Write(StreamStderr, []byte(text))
}

// flush delivers a held partial character at the end of the run (it stays invalid UTF-8; a
// client's decoder replaces it) and takes no more chunks.
func (s *streamer) flush() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	for i, st := range []Stream{StreamStdout, StreamStderr} {
		if h := s.held[i]; len(h) > 0 {
			s.held[i] = nil
			s.pass(i, st, h)
		}
	}
}

// partialRuneTail returns how many bytes at the end of p are the start of a UTF-8 character
// whose rest is not in p.
func partialRuneTail(p []byte) int {
	for n := 1; n < utf8.UTFMax && n <= len(p); n++ {
		c := p[len(p)-n]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

// withStream returns a copy of req whose sink is st (nil: none).
func withStream(req RunRequest, st *streamer) RunRequest {
	if st == nil {
		req.Output = nil
	} else {
		req.Output = st
	}
	return req
}

// Interface guards
var (
	_ OutputSink   = (*streamer)(nil)
	_ ArtifactSink = (*streamer)(nil)
	_ OutputSink   = SinkFunc(nil)
)
