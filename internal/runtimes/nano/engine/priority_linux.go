package engine

import (
	"runtime"
	"sync"
	"syscall"
)

// Refill work runs at a lower CPU priority than runs, so starting interpreters in the background
// does not slow the code of a run on a small machine. Priority is per thread in Linux and an
// unprivileged process can lower a thread's priority but never raise it again (RLIMIT_NICE is 0),
// so a thread that was lowered must die before anything else runs on it: a goroutine that exits
// while locked to its thread takes the thread with it.

// lowNice is the nice value of refill threads.
const lowNice = 10

var lowThreads sync.Map // tid → struct{}: threads lowered and not yet known to be gone

// lowerThisThread locks the calling goroutine to its thread and lowers the thread's priority.
// The goroutine must either exit while still locked, or call leaveLowThread.
func lowerThisThread() {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, lowNice); err == nil {
		lowThreads.Store(tid, struct{}{})
	}
}

// leaveLowThread unlocks the calling goroutine from its lowered thread and has that thread end:
// a fresh goroutine started here usually runs next on this very thread (it goes into the
// processor's next slot); if it does, it exits locked and the thread dies. If another thread
// picked it up instead, the lowered thread stays listed, and escapeLowThread moves a run off it.
func leaveLowThread() {
	tid := syscall.Gettid()
	runtime.UnlockOSThread()
	if _, ok := lowThreads.Load(tid); !ok {
		return
	}
	go killThread(tid)
	runtime.Gosched()
}

// escapeLowThread makes sure the calling goroutine does not run on a lowered thread: if it does,
// it hands that thread to a goroutine that ends it and continues elsewhere. Call it before CPU
// work that must run at normal priority.
func escapeLowThread() {
	for i := 0; i < 4; i++ {
		tid := syscall.Gettid()
		if _, ok := lowThreads.Load(tid); !ok {
			return
		}
		go killThread(tid)
		runtime.Gosched()
	}
}

func killThread(tid int) {
	runtime.LockOSThread()
	if syscall.Gettid() == tid {
		lowThreads.Delete(tid)
		return // exit while locked: the runtime ends the thread
	}
	runtime.UnlockOSThread()
}
