package wire

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// writev writes iovs to w in vectored writes when w is a file (a pipe), and says whether it did.
func writev(w io.Writer, iovs [][]byte) (bool, error) {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return false, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	var werr error
	err = raw.Write(func(fd uintptr) bool {
		for len(iovs) > 0 {
			batch := iovs[:min(len(iovs), 1024)] // IOV_MAX
			n, err := unix.Writev(int(fd), batch)
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return false // wait until the pipe has room
			}
			if err != nil {
				werr = err
				return true
			}
			for n > 0 && len(iovs) > 0 {
				if n < len(iovs[0]) {
					iovs[0] = iovs[0][n:]
					n = 0
					break
				}
				n -= len(iovs[0])
				iovs = iovs[1:]
			}
			for len(iovs) > 0 && len(iovs[0]) == 0 {
				iovs = iovs[1:]
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return true, err
}
