package engine

import (
	"sync"
	"syscall"
)

// parkSize is the size of the driver's preallocated read buffer. A read of exactly this size with
// nothing pending, right after the driver reported, is the driver parking: the instance is idle
// and ready for the next hand-over.
const parkSize = 65521

// stdinPipe is the guest's fd 0. The host hands a run over by sending one message; between
// messages a read blocks, until the next hand-over, the run's deadline (the read fails with EINTR
// and the code is interrupted) or the instance's end (which stops the guest). User code reading stdin during a run therefore blocks until the
// deadline, as a program reading a terminal nobody types into would.
type stdinPipe struct {
	inst *Instance
	in   chan []byte // hand-overs; unbuffered: a send completes when the guest takes it

	mu      sync.Mutex
	pending []byte
}

func (p *stdinPipe) hasPending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending) > 0
}

// Read implements io.Reader for wazero's stdin. It runs on the guest's goroutine.
func (p *stdinPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	empty := len(p.pending) == 0
	p.mu.Unlock()
	if empty {
		// The driver parking waits only for the next hand-over (the run that just ended is
		// over; its deadline no longer applies); a read by user code waits within its run.
		done := p.inst.runDone()
		if len(b) == parkSize && p.inst.parkedNow() {
			done = nil
		}
		var msg []byte
		select {
		case msg = <-p.in:
		case <-p.inst.kill:
			p.inst.stopGuest()
		case <-done:
			// User code reading stdin at the deadline gets EINTR, on which CPython checks its
			// signals and raises the KeyboardInterrupt the host tripped.
			p.inst.stopAtDeadline()
			return 0, syscall.EINTR
		}
		escapeLowThread()
		p.mu.Lock()
		p.pending = msg
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := copy(b, p.pending)
	p.pending = p.pending[n:]
	return n, nil
}
