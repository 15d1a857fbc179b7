package worker

import (
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// chunker turns a run's output writes into OpChunk frames: writes within wire.ChunkDelay of the
// first unsent one travel together (a loop printing many short lines costs a frame per few
// milliseconds, not per line), in the order they were made, and no frame holds more than
// wire.MaxChunk. Sending blocks the guest's write while the daemon does not read, which is the
// back-pressure a pipe gives; the run's deadline still applies.
type chunker struct {
	id   uint64
	send func(*wire.Response) error

	// sending is held from taking pending output to having sent it, so frames keep their order
	// and close returns only when everything is out. Taken before mu.
	sending sync.Mutex
	mu      sync.Mutex
	pending []segment
	size    int
	timer   *time.Timer
	closed  bool
}

type segment struct {
	stream sandbox.Stream
	data   []byte
}

func newChunker(id uint64, send func(*wire.Response) error) *chunker {
	return &chunker{id: id, send: send}
}

// write takes a chunk of the guest's output (engine.Request.Stream).
func (c *chunker) write(stream sandbox.Stream, p []byte) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if n := len(c.pending); n > 0 && c.pending[n-1].stream == stream {
		c.pending[n-1].data = append(c.pending[n-1].data, p...)
	} else {
		c.pending = append(c.pending, segment{stream, append([]byte(nil), p...)})
	}
	c.size += len(p)
	if c.size >= wire.MaxChunk {
		c.mu.Unlock()
		c.flush()
		return
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(wire.ChunkDelay, c.flush)
	}
	c.mu.Unlock()
}

// take removes what is pending. The caller holds c.mu.
func (c *chunker) take() []segment {
	out := c.pending
	c.pending, c.size = nil, 0
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	return out
}

func (c *chunker) deliver(segs []segment) {
	for _, s := range segs {
		for len(s.data) > 0 {
			n := min(len(s.data), wire.MaxChunk)
			_ = c.send(&wire.Response{Op: wire.OpChunk, ID: c.id, Stream: s.stream, Data: s.data[:n]})
			s.data = s.data[n:]
		}
	}
}

// flush sends what is pending.
func (c *chunker) flush() {
	c.sending.Lock()
	defer c.sending.Unlock()
	c.mu.Lock()
	out := c.take()
	c.mu.Unlock()
	c.deliver(out)
}

// close sends what is pending and takes no more: the run has ended, its result comes next.
func (c *chunker) close() {
	c.sending.Lock()
	defer c.sending.Unlock()
	c.mu.Lock()
	c.closed = true
	out := c.take()
	c.mu.Unlock()
	c.deliver(out)
}
