package apiwire

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// StatusWriter remembers the status a handler wrote, for the log line and the metrics every
// front door writes when a request is done. Unwrap lets http.ResponseController reach the real
// writer, so streams still flush through it.
type StatusWriter struct {
	http.ResponseWriter
	// Status is the status written; 0 until the handler writes a header or a body.
	Status int
}

// WriteHeader records the first status and passes it on.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 when nothing was written before, as net/http does.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// RequestID keeps a client's X-Request-Id when it is short (at most 64 bytes) and plain
// (letters, digits, '-', '_', '.'), so it can be searched for in logs and cannot forge log
// lines; otherwise it makes a random one, prefix followed by 16 hex digits.
func RequestID(given, prefix string) string {
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
	return prefix + hex.EncodeToString(b[:])
}
