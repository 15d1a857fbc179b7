package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// lockSessions takes the sessions directory for this daemon (sessions that outlive it, with their
// snapshots): an open file holding an exclusive flock, released when it is closed or the process
// ends (kill -9 included). Nil, with no error, when sessions are ephemeral or another process (a
// running daemon, and this is `agentbox run --local` or `agentbox mcp` beside it) holds the
// directory: this one then keeps its sessions in memory.
func lockSessions(cfg config.Config, log *slog.Logger) (*os.File, error) {
	if cfg.Sessions.Ephemeral {
		return nil, nil
	}
	dir := cfg.SessionsPath()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sessions directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sessions directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		log.Warn("another daemon holds the sessions directory; this one's sessions end with it", "dir", dir)
		return nil, nil
	}
	return f, nil
}
