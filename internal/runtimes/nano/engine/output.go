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
	// tee, when set, gets each kept part of a write as it is made (streaming).
	tee func([]byte)
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
	kept := p
	if int64(len(p)) > room {
		kept = p[:room]
		w.truncated = true
	}
	w.buf = append(w.buf, kept...)
	if w.tee != nil && len(kept) > 0 {
		w.tee(kept)
	}
	return len(p), nil
}

// reset empties the writer and sets the cap and the tee (nil: none) for the next run.
func (w *capWriter) reset(limit int64, tee func([]byte)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf, w.limit, w.truncated, w.tee = nil, limit, false, tee
}

// untee stops the tee: the run it streamed for has ended.
func (w *capWriter) untee() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tee = nil
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
