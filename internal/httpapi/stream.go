package httpapi

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Streamed runs (api/stream.go has the wire format). The run's chunks reach the client through
// a bounded queue: the runtime's goroutine puts a chunk in the queue and never waits for the
// client, a writer goroutine takes chunks out and writes them to the connection, where a slow
// client blocks only that goroutine. When the queue holds streamQueueBytes, further chunks are
// dropped and a "dropped" marker with their byte counts takes their place in the order, so the
// daemon holds at most that much per stream request beyond the run's own output (itself capped).
// The final result carries every byte within the caps, dropped or not.

// streamQueueBytes bounds what a streamed run's queue holds for a client that does not read.
const streamQueueBytes = 256 << 10

// streamFormat returns the streaming media type the request's Accept header asks for, or "" for
// the JSON answer. The first of the two streaming types named wins; application/json or */*
// before them keeps JSON.
func streamFormat(r *http.Request) string {
	for _, part := range strings.Split(strings.Join(r.Header.Values("Accept"), ","), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["q"] == "0" {
			continue
		}
		switch mt {
		case api.MediaTypeEventStream, api.MediaTypeNDJSON:
			return mt
		case "application/json":
			return ""
		}
	}
	return ""
}

// eventStream writes a run's events to one response. It is the run's sandbox.OutputSink.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sse bool

	mu      sync.Mutex
	queue   []queued
	bytes   int
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	started bool // the status and headers are out: errors go as events now
	// sent are the artifacts already streamed, by ID: the end does not repeat them.
	sent   map[string]bool
	broken bool // a write failed: the client is gone
}

// queued is a chunk, a drop marker (drop set), an artifact (art set) or a notice.
type queued struct {
	stream sandbox.Stream
	data   []byte
	drop   *api.StreamDropped
	art    *api.Artifact
	notice *api.Notice
}

// Notice queues the session's notice, before any output (sandbox.NoticeSink).
func (es *eventStream) Notice(n sandbox.Notice) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.closed || es.broken {
		return
	}
	wire := apiwire.NoticeToAPI(n)
	es.queue = append(es.queue, queued{notice: &wire})
	select {
	case es.wake <- struct{}{}:
	default:
	}
}

// Artifact queues an artifact the run just made (sandbox.ArtifactSink). Artifacts take no room
// in the queue's bound: a run has at most a few dozen, and their content is not sent.
func (es *eventStream) Artifact(a sandbox.Artifact) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.closed || es.broken {
		return
	}
	if es.sent == nil {
		es.sent = map[string]bool{}
	}
	es.sent[a.ID] = true
	wire := apiwire.ArtifactToAPI(a)
	es.queue = append(es.queue, queued{art: &wire})
	select {
	case es.wake <- struct{}{}:
	default:
	}
}

func newEventStream(w http.ResponseWriter, format string) *eventStream {
	es := &eventStream{w: w, rc: http.NewResponseController(w), sse: format == api.MediaTypeEventStream,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go es.pump()
	return es
}

// Write queues a chunk without waiting for the client (sandbox.OutputSink).
func (es *eventStream) Write(stream sandbox.Stream, p []byte) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.closed || es.broken {
		return
	}
	if es.bytes+len(p) > streamQueueBytes {
		n := len(es.queue)
		if n == 0 || es.queue[n-1].drop == nil {
			es.queue = append(es.queue, queued{drop: &api.StreamDropped{}})
			n++
		}
		if stream == sandbox.StreamStderr {
			es.queue[n-1].drop.StderrBytes += int64(len(p))
		} else {
			es.queue[n-1].drop.StdoutBytes += int64(len(p))
		}
	} else if n := len(es.queue); n > 0 && es.queue[n-1].drop == nil && es.queue[n-1].stream == stream {
		es.queue[n-1].data = append(es.queue[n-1].data, p...) // coalesce while the client lags
		es.bytes += len(p)
	} else {
		es.queue = append(es.queue, queued{stream: stream, data: append([]byte(nil), p...)})
		es.bytes += len(p)
	}
	select {
	case es.wake <- struct{}{}:
	default:
	}
}

// pump writes queued chunks until close; it is the only goroutine that writes while the run runs.
func (es *eventStream) pump() {
	defer close(es.done)
	for {
		_, open := <-es.wake
		es.mu.Lock()
		q := es.queue
		es.queue, es.bytes = nil, 0
		es.mu.Unlock()
		for _, c := range q {
			switch {
			case c.notice != nil:
				es.event(api.StreamEvent{Type: api.EventNotice, Notice: c.notice})
			case c.art != nil:
				es.event(api.StreamEvent{Type: api.EventArtifact, Artifact: c.art})
			case c.drop != nil:
				es.event(api.StreamEvent{Type: api.EventDropped, Dropped: c.drop})
			case c.stream == sandbox.StreamStderr:
				es.event(api.StreamEvent{Type: api.EventStderr, Text: string(c.data)})
			default:
				es.event(api.StreamEvent{Type: api.EventStdout, Text: string(c.data)})
			}
		}
		if !open {
			return
		}
		es.mu.Lock()
		idle := len(es.queue) == 0 && es.closed
		es.mu.Unlock()
		if idle {
			return
		}
	}
}

// finish stops taking chunks and waits until the queued ones are written. It reports whether
// anything was written (the answer must then go on as events).
func (es *eventStream) finish() bool {
	es.mu.Lock()
	if !es.closed {
		es.closed = true
		close(es.wake)
	}
	es.mu.Unlock()
	<-es.done
	return es.started
}

// event writes one event and flushes it. Only pump, then (after finish) the handler, call it.
func (es *eventStream) event(ev api.StreamEvent) {
	if es.broken {
		return
	}
	if !es.started {
		es.started = true
		h := es.w.Header()
		if es.sse {
			h.Set("Content-Type", api.MediaTypeEventStream)
		} else {
			h.Set("Content-Type", api.MediaTypeNDJSON)
		}
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold the events back
		es.w.WriteHeader(http.StatusOK)
	}
	var buf bytes.Buffer
	if es.sse {
		buf.WriteString("event: " + ev.Type + "\ndata: ")
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(ev) // ends with "\n"; JSON has no raw newlines, so one data line
	if es.sse {
		buf.WriteString("\n")
	}
	if _, err := es.w.Write(buf.Bytes()); err != nil {
		es.mu.Lock()
		es.broken = true
		es.mu.Unlock()
		return
	}
	if err := es.rc.Flush(); err != nil {
		es.mu.Lock()
		es.broken = true
		es.mu.Unlock()
	}
}

// end writes what the run came to: its outputs and artifacts, then the result, or the error and
// the partial result.
func (es *eventStream) end(res *sandbox.Result, body api.ErrorResponse, err error) {
	last := res
	if err != nil {
		if e := sandbox.AsError(err); e != nil && e.Result != nil {
			last = e.Result
		}
	}
	if last != nil {
		wire := apiwire.ResultToAPI(last)
		for i := range wire.Outputs {
			es.event(api.StreamEvent{Type: api.EventOutput, Output: &wire.Outputs[i]})
		}
		for i := range wire.Artifacts {
			if !es.sent[wire.Artifacts[i].ID] {
				es.event(api.StreamEvent{Type: api.EventArtifact, Artifact: &wire.Artifacts[i]})
			}
		}
	}
	if err != nil {
		es.event(api.StreamEvent{Type: api.EventError, Error: &body.Error, Result: body.Result})
		return
	}
	es.event(api.StreamEvent{Type: api.EventResult, Result: apiwire.ResultToAPI(res)})
}

// Interface guards
var (
	_ sandbox.OutputSink   = (*eventStream)(nil)
	_ sandbox.ArtifactSink = (*eventStream)(nil)
)
