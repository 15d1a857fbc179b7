package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// stuckWriter is a client that does not read: its first write blocks until released.
type stuckWriter struct {
	*httptest.ResponseRecorder
	mu      sync.Mutex
	release chan struct{}
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseRecorder.Write(p)
}

func (w *stuckWriter) Flush() {}

// TestEventStreamBound: a client that does not read never makes the stream hold more than
// streamQueueBytes, the producer never waits, and what did not fit is counted in dropped events,
// in order, so that chunks plus drops are all the output.
func TestEventStreamBound(t *testing.T) {
	w := &stuckWriter{ResponseRecorder: httptest.NewRecorder(), release: make(chan struct{})}
	es := newEventStream(w, api.MediaTypeNDJSON)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	const n = 64 // 4 MiB
	for i := range n {
		es.Write(sandbox.StreamStdout, chunk)
		es.mu.Lock()
		held := es.bytes
		es.mu.Unlock()
		if held > streamQueueBytes {
			t.Fatalf("after %d chunks the stream holds %d bytes, over its %d", i+1, held, streamQueueBytes)
		}
	}
	es.Write(sandbox.StreamStderr, []byte("late\n"))
	close(w.release)
	if !es.finish() {
		t.Fatal("nothing was written")
	}
	var text, dropped int64
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev api.StreamEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Type)
		switch ev.Type {
		case api.EventStdout:
			text += int64(len(ev.Text))
		case api.EventDropped:
			dropped += ev.Dropped.StdoutBytes + ev.Dropped.StderrBytes
		}
	}
	if text+dropped != n*64<<10+5 || dropped == 0 {
		t.Fatalf("streamed %d and dropped %d bytes of %d; events %v", text, dropped, n*64<<10+5, kinds)
	}
	if w.Header().Get("Content-Type") != api.MediaTypeNDJSON || w.Code != http.StatusOK {
		t.Fatalf("status %d, type %q", w.Code, w.Header().Get("Content-Type"))
	}
}
