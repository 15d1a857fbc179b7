package e2b

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
)

// Every request through the E2B front door gets what agentbox's own front doors give theirs: an
// X-Request-Id (the client's, if it sent a plain one), a panic turned into an internal error
// instead of a dropped connection, and one log line when it is done.

// withRequest wraps next with the request id, the panic guard and the log line.
func (h *Handler) withRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := apiwire.RequestID(r.Header.Get("X-Request-Id"), "e2b_")
		w.Header().Set("X-Request-Id", id)
		sw := &apiwire.StatusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.log.Error("e2b: panic in handler", "request_id", id, "panic", p, "stack", string(debug.Stack()))
				if sw.Status == 0 {
					h.fail(sw, r, fmt.Errorf("panic: %v", p))
				}
			}
			status := sw.Status
			if status == 0 {
				status = http.StatusOK
			}
			level := slog.LevelInfo
			if r.URL.Path == "/health" && status < 400 {
				level = slog.LevelDebug // the SDKs' isRunning polls it
			}
			h.log.LogAttrs(r.Context(), level, "e2b request", slog.String("request_id", id), slog.String("method", r.Method),
				slog.String("host", r.Host), slog.String("path", r.URL.Path), slog.Int("status", status),
				slog.Float64("ms", float64(time.Since(start).Microseconds())/1000))
		}()
		next.ServeHTTP(sw, r)
	})
}
