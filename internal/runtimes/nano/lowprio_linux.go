package nano

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// persistNice is the niceness of the daemon's thread that makes steps' snapshots durable (pages
// hashed, compressed, written): below the workers' (launch.go), so that on a busy machine a
// session's next run, in its worker, goes before the durable copy of the step before it.
const persistNice = 10

var (
	lowOnce sync.Once
	lowWork chan func()
)

// lowPriority runs fn on the process's one thread at persistNice and waits for it. Niceness is
// per thread on Linux. The thread lives as long as the process: a goroutine that ends locked to
// its thread ends the thread, and a worker forked from that thread earlier would get its
// parent-death signal (jail's Pdeathsig belongs to the forking thread), and a process without
// CAP_SYS_NICE could not give the thread its priority back.
func lowPriority(fn func()) {
	lowOnce.Do(func() {
		lowWork = make(chan func())
		go func() {
			runtime.LockOSThread()
			_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), persistNice)
			for f := range lowWork {
				f()
			}
		}()
	})
	done := make(chan struct{})
	lowWork <- func() { defer close(done); fn() }
	<-done
}
