package nano

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// workerPipeBytes is the capacity asked for the pipe a worker answers on. A step's snapshot
// (a few hundred KiB) then fits in it at once: with the kernel's default 64 KiB the worker's
// write blocks until the daemon has read each 64 KiB, a wake-up of the daemon's reader per
// piece on a loaded machine, and the worker reads the session's next run only after it.
const workerPipeBytes = 1 << 20

// growPipe asks the kernel for a larger pipe buffer; without it (a limit, another platform)
// the pipe stays as it was.
func growPipe(r io.Reader) {
	f, ok := r.(*os.File)
	if !ok {
		return
	}
	// Through the raw descriptor: Fd would put the pipe in blocking mode.
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, workerPipeBytes) })
	}
}
