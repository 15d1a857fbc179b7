package worker

import (
	"runtime"
	"syscall"
)

// refillNice is the nice value of the pool's filler thread.
const refillNice = 10

// lowerThread locks the calling goroutine to its OS thread and lowers that thread's CPU priority.
// Priority is per thread, and an unprivileged process cannot raise it again: the goroutine must
// exit while still locked, so the thread ends with it and never runs anything else.
func lowerThread() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), refillNice)
}
