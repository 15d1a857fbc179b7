package engine

import (
	"sync"
	"unicode/utf8"
)

// capWriter keeps at most limit bytes of a guest stream and drops the rest, remembering that it
// did. It never fails: an error would reach the guest as an OSError that user code could catch
// and ignore, while dropping is what the limit promises.
type capWriter struct {
	mu        sync.Mutex
	buf       []byte
	limit     int64
	truncated bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.limit - int64(len(w.buf))
	if room <= 0 {
		if len(p) > 0 {
			w.truncated = true
		}
		return len(p), nil
	}
	if int64(len(p)) > room {
		w.buf = append(w.buf, p[:room]...)
		w.truncated = true
	} else {
		w.buf = append(w.buf, p...)
	}
	return len(p), nil
}

// reset empties the writer and sets the cap for the next run.
func (w *capWriter) reset(limit int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf, w.limit, w.truncated = nil, limit, false
}

// take returns what was kept so far and whether anything was dropped. A multi-byte character cut
// by the cap is left out.
func (w *capWriter) take() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf
	if w.truncated {
		b = trimPartialRune(b)
	}
	return string(b), w.truncated
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b
		}
		if utf8.RuneStart(c) {
			if r, _ := utf8.DecodeRune(b[len(b)-i:]); r == utf8.RuneError {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
