package e2b

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

// Every request through the E2B front door gets what agentbox's own front doors give theirs: an
// X-Request-Id (the client's, if it sent a plain one), a panic turned into an internal error
// instead of a dropped connection, and one log line when it is done.

// statusWriter remembers the status written; Unwrap lets the services' http.ResponseController
// flush a stream through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withRequest wraps next with the request id, the panic guard and the log line.
func (h *Handler) withRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := requestID(r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Request-Id", id)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.log.Error("e2b: panic in handler", "request_id", id, "panic", p, "stack", string(debug.Stack()))
				if sw.status == 0 {
					h.fail(sw, r, fmt.Errorf("panic: %v", p))
				}
			}
			status := sw.status
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

// requestID keeps a client's id when it is short and plain, and makes one otherwise.
func requestID(given string) string {
	if n := len(given); n > 0 && n <= 64 {
		ok := true
		for _, c := range given {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				ok = false
				break
			}
		}
		if ok {
			return given
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "e2b_" + hex.EncodeToString(b[:])
}
