package dlp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// The JSON walker finds the token (key, string, number) that holds a match and its path. It runs
// only when a JSON body has findings, and stops after the last one. It is lenient: it follows
// brackets, strings and scalars without validating the grammar, and reports ok=false only when
// the brackets do not balance or a string is not closed; a body it cannot follow is redacted as
// text and its findings have no field.

var jsonDelim = [256]bool{',': true, '}': true, ']': true, ' ': true, '\t': true, '\n': true, '\r': true, ':': true}

type jsonKind uint8

const (
	jsonKey jsonKind = iota
	jsonString
	jsonNumber // or true, false, null
)

type jsonToken struct {
	kind       jsonKind
	start, end int // raw span, quotes included
}

type jsonFrame struct {
	array      bool
	index      int
	key        jsonToken
	hasKey     bool
	expectsKey bool
}

type jsonWalker struct {
	raw   []byte
	stack []jsonFrame
	// hide reports whether a key's raw span holds a match, so it is shown as [REDACTED].
	hide func(start, end int) bool
}

// walk calls fn for each scalar token until fn returns false or the body ends.
func (w *jsonWalker) walk(fn func(t jsonToken) bool) (ok bool) {
	raw := w.raw
	n := len(raw)
	for i := 0; i < n; {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			i++
		case ',':
			if k := len(w.stack); k > 0 {
				if w.stack[k-1].array {
					w.stack[k-1].index++
				} else {
					w.stack[k-1].expectsKey = true
				}
			}
			i++
		case '{', '[':
			w.stack = append(w.stack, jsonFrame{array: c == '[', expectsKey: c == '{'})
			i++
		case '}', ']':
			if len(w.stack) == 0 {
				return false
			}
			w.stack = w.stack[:len(w.stack)-1]
			i++
		case '"':
			j := i + 1
			for {
				k := bytes.IndexByte(raw[j:], '"')
				if k < 0 {
					return false
				}
				j += k
				bs := 0
				for bs < j-i-1 && raw[j-1-bs] == '\\' {
					bs++
				}
				j++
				if bs%2 == 0 {
					break
				}
			}
			t := jsonToken{kind: jsonString, start: i, end: j}
			if k := len(w.stack); k > 0 && w.stack[k-1].expectsKey {
				t.kind = jsonKey
				top := &w.stack[k-1]
				top.key, top.hasKey, top.expectsKey = t, true, false
			}
			if !fn(t) {
				return true
			}
			i = j
		default:
			j := i + 1
			for j < n && !jsonDelim[raw[j]] {
				j++
			}
			if !fn(jsonToken{kind: jsonNumber, start: i, end: j}) {
				return true
			}
			i = j
		}
	}
	return len(w.stack) == 0
}

// path renders the current position: $.a.b[2]["odd key"]. Keys holding a match are shown as
// [REDACTED]; keys over 64 bytes are cut.
func (w *jsonWalker) path() string {
	var b strings.Builder
	b.WriteString("$")
	for _, f := range w.stack {
		if f.array {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
			continue
		}
		if !f.hasKey {
			continue
		}
		if w.hide != nil && w.hide(f.key.start, f.key.end) {
			b.WriteString(".[REDACTED]")
			continue
		}
		var key string
		if json.Unmarshal(w.raw[f.key.start:f.key.end], &key) != nil {
			key = string(w.raw[f.key.start+1 : f.key.end-1])
		}
		if len(key) > 64 {
			key = key[:64] + "…"
		}
		if isIdent(key) {
			b.WriteString("." + key)
		} else {
			b.WriteString("[" + strconv.Quote(key) + "]")
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isWord(c) || c == '-') || (i == 0 && isDigit(c)) {
			return false
		}
	}
	return true
}
