package heavy

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A guest that sends a broken frame (or answers a request nobody made) is given up: its pending
// requests fail with runtime_unavailable and the box takes no more. Nothing else is touched.
func TestBrokenGuestFrames(t *testing.T) {
	for name, bad := range map[string]func(io.Writer){
		"garbage": func(w io.Writer) {
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], 4)
			w.Write(append(hdr[:], "nope"...))
		},
		"oversized": func(w io.Writer) {
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], proto.MaxFrame+1)
			w.Write(hdr[:])
		},
		"unasked answer": func(w io.Writer) { proto.Write(w, &proto.Frame{Op: proto.OpResult, ID: 999}) },
	} {
		t.Run(name, func(t *testing.T) {
			guestOut, daemonIn := io.Pipe()
			b := &box{id: "test", log: slog.New(slog.NewTextHandler(io.Discard, nil)), pending: map[uint64]*call{},
				exited: make(chan struct{}), gone: make(chan struct{}), stdin: nopCloser{io.Discard}}
			close(b.exited)
			hello := make(chan error, 1)
			go b.read(guestOut, true, hello)
			proto.Write(daemonIn, &proto.Frame{Op: proto.OpHello, Version: proto.Version})
			if err := <-hello; err != nil {
				t.Fatal(err)
			}
			c, err := b.send(&proto.Frame{Op: proto.OpStats}, nil)
			if err != nil {
				t.Fatal(err)
			}
			go bad(daemonIn)
			select {
			case _, ok := <-c.answer:
				if ok {
					t.Fatal("a pending request got an answer from a broken guest")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the pending request was not failed")
			}
			if _, err := b.send(&proto.Frame{Op: proto.OpStats}, nil); !errors.Is(err, sandbox.ErrRuntimeUnavailable) {
				t.Errorf("a request to a broken box: %v", err)
			}
		})
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
