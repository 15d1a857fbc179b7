package dlp

import (
	"bytes"
	"sort"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// A JSON body is scanned as one text, its "view": the body with every string escape decoded
// (\u0041 → A, \n → a line break, \" → "), everything else as it is. Keys, values and the
// structure between them stay together, so rules that need context (password": "...") see it,
// and an escape cannot hide a secret. Numbers are scanned as they are written, so a card number
// sent as a JSON number is found. A backslash can only occur inside a JSON string, so the view
// is made by looking for backslashes alone, and a body without any (the common case) is its own
// view, with no copy.
//
// escapes map view offsets back to the body for paths and redaction.

// escRec is one decoded escape: body[rs:re] became view[vs:ve].
type escRec struct{ rs, re, vs, ve int }

// viewPool recycles view buffers: a 10 MB body would otherwise cost a 10 MB allocation (zeroed,
// then collected) per scan.
var viewPool sync.Pool

// jsonView returns the view of raw and the escapes decoded in it. If the view is not raw itself,
// the caller may hand it back with putView when done with it.
func jsonView(raw []byte) ([]byte, []escRec) {
	i := bytes.IndexByte(raw, '\\')
	if i < 0 {
		return raw, nil
	}
	var view []byte
	if p, ok := viewPool.Get().(*[]byte); ok && cap(*p) >= len(raw) {
		view = (*p)[:0]
	} else {
		view = make([]byte, 0, len(raw))
	}
	var esc []escRec
	prev := 0
	for i >= 0 {
		i += prev
		view = append(view, raw[prev:i]...)
		r, n := decodeEscape(raw[i:])
		if n == 0 { // not a valid escape: keep the backslash
			view = append(view, '\\')
			prev = i + 1
		} else {
			vs := len(view)
			view = utf8.AppendRune(view, r)
			esc = append(esc, escRec{i, i + n, vs, len(view)})
			prev = i + n
		}
		i = bytes.IndexByte(raw[prev:], '\\')
	}
	view = append(view, raw[prev:]...)
	return view, esc
}

func putView(view []byte) {
	if cap(view) >= 64<<10 {
		viewPool.Put(&view)
	}
}

// decodeEscape decodes the escape at the start of b (which starts with a backslash) and returns
// the rune and the escape's length, or n == 0 if it is not a valid escape.
func decodeEscape(b []byte) (r rune, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r1, ok := hex4(b[2:])
		if !ok {
			return 0, 0
		}
		if utf16.IsSurrogate(r1) {
			if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
				if r2, ok := hex4(b[8:]); ok {
					if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
						return r, 12
					}
				}
			}
			return utf8.RuneError, 6
		}
		return r1, 6
	}
	return 0, 0
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// viewToRaw maps a view offset to the body: a start inside a decoded escape maps to the escape's
// start, an end to its end.
func viewToRaw(esc []escRec, v int, isEnd bool) int {
	k := sort.Search(len(esc), func(i int) bool {
		if isEnd {
			return esc[i].vs >= v
		}
		return esc[i].vs > v
	}) - 1
	if k < 0 {
		return v
	}
	e := esc[k]
	if v < e.ve || (isEnd && v == e.ve) {
		if isEnd {
			return e.re
		}
		return e.rs
	}
	return e.re + (v - e.ve)
}
