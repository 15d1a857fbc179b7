// Package tunnel carries TCP-like byte streams over the one framed channel between the daemon and
// a VM-like sandbox's guest agent (package proto). The guest accepts a connection from the code (on the proxy port
// of the sandbox's own loopback), opens a stream for it, and the daemon hands the other end to
// the egress gateway. There is no other way out of a sandbox: it has no network device.
//
// Each side may have at most Window bytes of a stream in flight; the receiver acknowledges what
// the reader has consumed. So a slow reader holds back only its own stream, never the channel:
// the frame reader never blocks on a stream's buffer.
package tunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Window is how many unacknowledged bytes a stream may have in flight per direction.
const Window = 256 << 10

// Chunk bounds the data of one frame.
const Chunk = 32 << 10

// MaxStreams bounds the streams of one sandbox.
const MaxStreams = 256

// Frame is what the tunnel needs of the channel's frames. The channel (package proto) maps these
// to its own frame type.
type Frame struct {
	Kind   Kind
	Stream uint64
	Data   []byte // KindData
	Ack    int64  // KindAck: bytes consumed
}

// Kind is what a tunnel frame does.
type Kind int

const (
	KindOpen  Kind = iota + 1 // a new stream (from the side that accepted the connection)
	KindData                  // bytes of a stream
	KindAck                   // the peer's reader consumed Ack more bytes
	KindClose                 // the stream is closed: no more reads or writes
)

// Mux is one side of the tunnel.
type Mux struct {
	send   func(Frame) error
	accept func(net.Conn) // called for each stream the peer opens (may be nil on the opening side)

	mu      sync.Mutex
	streams map[uint64]*Stream
	next    uint64
	closed  error
}

// New returns a Mux that writes frames with send (which must be safe for concurrent use) and
// gives streams the peer opens to accept.
func New(send func(Frame) error, accept func(net.Conn)) *Mux {
	return &Mux{send: send, accept: accept, streams: map[uint64]*Stream{}, next: 1}
}

// Open starts a stream to the peer.
func (m *Mux) Open() (*Stream, error) {
	m.mu.Lock()
	if m.closed != nil {
		m.mu.Unlock()
		return nil, m.closed
	}
	if len(m.streams) >= MaxStreams {
		m.mu.Unlock()
		return nil, fmt.Errorf("tunnel: %d streams open, the most a sandbox may have", MaxStreams)
	}
	id := m.next
	m.next++
	s := newStream(m, id)
	m.streams[id] = s
	m.mu.Unlock()
	if err := m.send(Frame{Kind: KindOpen, Stream: id}); err != nil {
		m.drop(id)
		return nil, err
	}
	return s, nil
}

// Handle takes a frame from the peer. It never blocks on a stream. An error means the peer broke
// the protocol (unknown stream, data beyond the window): the caller should end the channel.
func (m *Mux) Handle(f Frame) error {
	m.mu.Lock()
	s := m.streams[f.Stream]
	if f.Kind == KindOpen {
		if s != nil || m.accept == nil || m.closed != nil {
			m.mu.Unlock()
			return fmt.Errorf("tunnel: unexpected open of stream %d", f.Stream)
		}
		if len(m.streams) >= MaxStreams {
			m.mu.Unlock()
			_ = m.send(Frame{Kind: KindClose, Stream: f.Stream})
			return nil
		}
		s = newStream(m, f.Stream)
		m.streams[f.Stream] = s
		m.mu.Unlock()
		go m.accept(s)
		return nil
	}
	m.mu.Unlock()
	if s == nil {
		// Frames may still arrive for a stream this side has closed.
		return nil
	}
	switch f.Kind {
	case KindData:
		return s.push(f.Data)
	case KindAck:
		s.credit(f.Ack)
	case KindClose:
		s.remoteClose()
		m.drop(f.Stream)
	default:
		return fmt.Errorf("tunnel: unknown frame kind %d", f.Kind)
	}
	return nil
}

// Close ends every stream (the channel is gone).
func (m *Mux) Close(err error) {
	if err == nil {
		err = net.ErrClosed
	}
	m.mu.Lock()
	if m.closed == nil {
		m.closed = err
	}
	ss := m.streams
	m.streams = map[uint64]*Stream{}
	m.mu.Unlock()
	for _, s := range ss {
		s.remoteClose()
	}
}

// Len is the number of open streams.
func (m *Mux) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.streams)
}

func (m *Mux) drop(id uint64) {
	m.mu.Lock()
	delete(m.streams, id)
	m.mu.Unlock()
}

// Stream is one connection through the tunnel. It implements net.Conn, deadlines included.
type Stream struct {
	m  *Mux
	id uint64

	mu       sync.Mutex
	cond     *sync.Cond
	buf      []byte // received, not yet read
	inflight int64  // bytes sent and not yet acknowledged
	unacked  int64  // bytes read and not yet acknowledged to the peer
	rclosed  bool   // the peer closed, or the mux ended
	lclosed  bool   // Close was called
	rdl, wdl time.Time
	timers   [2]*time.Timer
}

func newStream(m *Mux, id uint64) *Stream {
	s := &Stream{m: m, id: id}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *Stream) push(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lclosed {
		return nil
	}
	if len(s.buf)+len(data) > Window {
		return fmt.Errorf("tunnel: stream %d: the peer sent beyond the window", s.id)
	}
	s.buf = append(s.buf, data...)
	s.cond.Broadcast()
	return nil
}

func (s *Stream) credit(n int64) {
	s.mu.Lock()
	s.inflight -= n
	if s.inflight < 0 {
		s.inflight = 0
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *Stream) remoteClose() {
	s.mu.Lock()
	s.rclosed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *Stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	for len(s.buf) == 0 {
		switch {
		case s.lclosed:
			s.mu.Unlock()
			return 0, net.ErrClosed
		case s.rclosed:
			s.mu.Unlock()
			return 0, io.EOF
		case !s.rdl.IsZero() && !time.Now().Before(s.rdl):
			s.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		s.cond.Wait()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	if len(s.buf) == 0 {
		s.buf = nil
	}
	s.unacked += int64(n)
	ack := int64(0)
	// Acknowledge in batches of a quarter window, so small reads do not cost a frame each.
	if s.unacked >= Window/4 || len(s.buf) == 0 {
		ack, s.unacked = s.unacked, 0
	}
	s.mu.Unlock()
	if ack > 0 {
		_ = s.m.send(Frame{Kind: KindAck, Stream: s.id, Ack: ack})
	}
	return n, nil
}

func (s *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		s.mu.Lock()
		for {
			switch {
			case s.lclosed:
				s.mu.Unlock()
				return written, net.ErrClosed
			case s.rclosed:
				s.mu.Unlock()
				return written, io.ErrClosedPipe
			case !s.wdl.IsZero() && !time.Now().Before(s.wdl):
				s.mu.Unlock()
				return written, os.ErrDeadlineExceeded
			}
			if s.inflight < Window {
				break
			}
			s.cond.Wait()
		}
		n := min(len(p), Chunk, int(Window-s.inflight))
		s.inflight += int64(n)
		s.mu.Unlock()
		chunk := make([]byte, n)
		copy(chunk, p[:n])
		if err := s.m.send(Frame{Kind: KindData, Stream: s.id, Data: chunk}); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Close ends the stream in both directions and tells the peer.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.lclosed {
		s.mu.Unlock()
		return nil
	}
	s.lclosed = true
	s.buf = nil
	for _, t := range s.timers {
		if t != nil {
			t.Stop()
		}
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	s.m.drop(s.id)
	err := s.m.send(Frame{Kind: KindClose, Stream: s.id})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Stream) LocalAddr() net.Addr  { return addr(fmt.Sprintf("tunnel:%d", s.id)) }
func (s *Stream) RemoteAddr() net.Addr { return addr(fmt.Sprintf("tunnel:%d", s.id)) }

func (s *Stream) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

func (s *Stream) SetReadDeadline(t time.Time) error  { s.setDeadline(0, t); return nil }
func (s *Stream) SetWriteDeadline(t time.Time) error { s.setDeadline(1, t); return nil }

func (s *Stream) setDeadline(i int, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i == 0 {
		s.rdl = t
	} else {
		s.wdl = t
	}
	if s.timers[i] != nil {
		s.timers[i].Stop()
		s.timers[i] = nil
	}
	if !t.IsZero() {
		// Wake the waiters when the deadline passes so they see it.
		s.timers[i] = time.AfterFunc(time.Until(t), func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
	}
	s.cond.Broadcast()
}

type addr string

func (a addr) Network() string { return "tunnel" }
func (a addr) String() string  { return string(a) }

// Interface guards.
var _ net.Conn = (*Stream)(nil)
