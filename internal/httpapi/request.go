package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
)

// reqInfo is what the layers of one request tell each other: the handler fills in the runtime,
// the router the route, fail the error code; logging and metrics read them at the end.
type reqInfo struct {
	id      string
	route   string
	runtime string
	code    string
	quiet   bool
}

type infoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// withRequest gives every request an id (the client's X-Request-Id if it is sane), turns panics
// into internal errors, and logs and counts the request when it is done.
func (s *API) withRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &reqInfo{id: apiwire.RequestID(r.Header.Get("X-Request-Id"), ""), route: "unmatched"}
		r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
		w.Header().Set("X-Request-Id", info.id)
		sw := &apiwire.StatusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "request_id", info.id, "panic", p, "stack", string(debug.Stack()))
				if sw.Status == 0 {
					s.fail(sw, r, fmt.Errorf("panic: %v", p))
				}
			}
			status := sw.Status
			if status == 0 {
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			s.metrics.observeRequest(r.Method, info.route, status, info.runtime, elapsed)
			level := slog.LevelInfo
			if info.quiet && status < 400 {
				level = slog.LevelDebug
			}
			attrs := []slog.Attr{
				slog.String("request_id", info.id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Float64("ms", apiwire.Millis(elapsed)),
			}
			if info.runtime != "" {
				attrs = append(attrs, slog.String("runtime", info.runtime))
			}
			if info.code != "" {
				attrs = append(attrs, slog.String("code", info.code))
			}
			s.log.LogAttrs(r.Context(), level, "request", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
}

func statusLabel(status int) string { return strconv.Itoa(status) }
