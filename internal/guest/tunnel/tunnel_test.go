package tunnel

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// pair connects two muxes through goroutine-delivered frames, as the channel does: frames of
// one direction arrive in order and Handle never waits on a reader.
func pair(t *testing.T) (guest, daemon *Mux, accepted chan net.Conn) {
	accepted = make(chan net.Conn, 16)
	var g, d *Mux
	toD, toG := make(chan Frame, 1<<16), make(chan Frame, 1<<16)
	g = New(func(f Frame) error { toD <- f; return nil }, nil)
	d = New(func(f Frame) error { toG <- f; return nil }, func(c net.Conn) { accepted <- c })
	done := make(chan struct{})
	var wg sync.WaitGroup
	pump := func(ch chan Frame, m *Mux) {
		defer wg.Done()
		for {
			select {
			case f := <-ch:
				if err := m.Handle(f); err != nil {
					t.Errorf("handle: %v", err)
				}
			case <-done:
				return
			}
		}
	}
	wg.Add(2)
	go pump(toD, d)
	go pump(toG, g)
	t.Cleanup(func() { close(done); wg.Wait() })
	return g, d, accepted
}

func TestConnConformance(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		g, d, acc := pair(t)
		s, err := g.Open()
		if err != nil {
			return nil, nil, nil, err
		}
		peer := <-acc
		return s, peer, func() { s.Close(); peer.Close(); g.Close(nil); d.Close(nil) }, nil
	})
}

// Many megabytes through one stream, beyond the window many times over, arrive intact while the
// reader is slow; another stream is not held back by it.
func TestFlowControl(t *testing.T) {
	g, _, acc := pair(t)
	slow, err := g.Open()
	if err != nil {
		t.Fatal(err)
	}
	slowPeer := <-acc
	fast, _ := g.Open()
	fastPeer := <-acc
	data := make([]byte, 8<<20)
	rand.Read(data)
	go func() { slow.Write(data); slow.Close() }()
	// The fast stream works while nobody reads the slow one.
	go fast.Write([]byte("ping"))
	buf := make([]byte, 4)
	fastPeer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(fastPeer, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("fast stream behind a stalled one: %q %v", buf, err)
	}
	var got bytes.Buffer
	small := make([]byte, 1000)
	for {
		n, err := slowPeer.Read(small)
		got.Write(small[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("got %d bytes, want %d identical", got.Len(), len(data))
	}
}

// A peer that sends beyond the window is a protocol error, not a buffer without bound.
func TestWindowViolation(t *testing.T) {
	m := New(func(Frame) error { return nil }, func(net.Conn) {})
	if err := m.Handle(Frame{Kind: KindOpen, Stream: 7}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := m.Handle(Frame{Kind: KindData, Stream: 7, Data: make([]byte, Window)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Handle(Frame{Kind: KindData, Stream: 7, Data: []byte{1}}); err == nil {
		t.Fatal("data beyond the window was taken")
	}
	if err := m.Handle(Frame{Kind: KindOpen, Stream: 7}); err == nil {
		t.Fatal("a second open of one stream was taken")
	}
}

// A guest cannot make the daemon hold more than MaxStreams streams: past the cap, an open is
// answered with a close.
func TestStreamCap(t *testing.T) {
	var mu sync.Mutex
	var closes int
	m := New(func(f Frame) error {
		mu.Lock()
		defer mu.Unlock()
		if f.Kind == KindClose {
			closes++
		}
		return nil
	}, func(net.Conn) {})
	for i := range MaxStreams + 10 {
		if err := m.Handle(Frame{Kind: KindOpen, Stream: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if m.Len() != MaxStreams || closes != 10 {
		t.Fatalf("%d streams held, %d refused; want %d and 10", m.Len(), closes, MaxStreams)
	}
}
