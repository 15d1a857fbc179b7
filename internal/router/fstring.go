package router

import "bytes"

// The fast path's f-strings. The scan finds where a string ends by CPython 3.11's rules; the code
// in an f-string's replacement fields is read here, by 3.11's rules for where a field's
// expression ends, and parsed as an expression. tree-sitter follows 3.12 and reads some fields
// differently (`{x:=}` as a walrus); those, and anything unusual (a backslash, a comment or a
// line break in a field, \N{...}, a lone }), stop the parse.

// stringAtom reads one string token, and the fields of an f-string.
func (p *parser) stringAtom() {
	t := p.tok()
	p.next()
	s := p.src[t.start:t.end]
	q := bytes.IndexAny(s, `"'`)
	isF, raw := false, false
	for _, c := range s[:q] {
		switch c | 0x20 {
		case 'f':
			isF = true
		case 'r':
			raw = true
		}
	}
	if !isF {
		return
	}
	quote, open := s[q], 1
	if len(s)-q >= 6 && s[q+1] == quote && s[q+2] == quote {
		open = 3
	}
	p.fstring(int(t.start)+q+open, int(t.end)-open, quote, raw, int(t.line))
}

// fstring reads the literal parts of an f-string's body src[i:end] and parses its fields.
func (p *parser) fstring(i, end int, quote byte, raw bool, line int) {
	src := p.src
	for i < end {
		switch src[i] {
		case '\n':
			line++
			i++
		case '\\':
			// tree-sitter's escapes: a backslash takes a quote, a backslash or a line break
			// with it, and so does CPython; \{ leaves the brace to open a field in both.
			i++
			if i >= end {
				break
			}
			switch c := src[i]; {
			case c == '\n':
				line++
				i++
			case c == '\r':
				i++
			case c == quote || c == '\\' || c == '\'' || c == '"':
				i++
			case c == 'N' && !raw:
				p.fail(`\N in an f-string`)
			}
		case '{':
			if i+1 < end && src[i+1] == '{' {
				i += 2
				continue
			}
			i = p.field(i+1, end, line, 0)
		case '}':
			if i+1 < end && src[i+1] == '}' {
				i += 2
				continue
			}
			p.fail("a single } in an f-string")
		default:
			i++
		}
	}
}

// field reads a replacement field from just after its {: the expression, an optional = and
// conversion, the format spec with its own fields; it returns where the field ends.
func (p *parser) field(i, end, line, nest int) int {
	src := p.src
	base := len(p.fbuf)
	depth := 0
	j := i
lex:
	for {
		for j < end && (src[j] == ' ' || src[j] == '\t') {
			j++
		}
		if j >= end {
			p.fail("an unterminated field")
		}
		c := src[j]
		if depth == 0 && (c == '}' || c == ':' || c == '!' && byteAt(src, j+1) != '=' || c == '=' && byteAt(src, j+1) != '=') {
			break lex
		}
		switch {
		case c == '\n' || c == '\r' || c == '#' || c == '\\':
			p.fail("a line break, comment or backslash in a field")
		case c == '\'' || c == '"':
			e := stringEnd(src, j, end)
			if e < 0 {
				p.fail("a string in a field")
			}
			if n := len(p.fbuf); n > base && p.fbuf[n-1].end == int32(j) && p.fbuf[n-1].kind == tName && isStringPrefix(src[p.fbuf[n-1].start:j]) {
				p.fbuf[n-1].kind, p.fbuf[n-1].end = tString, int32(e)
			} else {
				p.fbuf = append(p.fbuf, tok{start: int32(j), end: int32(e), line: int32(line), kind: tString})
			}
			j = e
		case isWordByte(c):
			k := j
			for k < end && isWordByte(src[k]) {
				k++
			}
			kind, e, ok := wordToken(src[:end], j, k)
			if !ok {
				p.fail("a malformed number or a non-ASCII name in a field")
			}
			p.fbuf = append(p.fbuf, tok{start: int32(j), end: int32(e), line: int32(line), kind: kind})
			j = e
		case c == '.' && isDigit(byteAt(src, j+1), 'd'):
			e := numberEnd(src[:end], j)
			if e < 0 || isWordByte(byteAt(src[:end], e)) {
				p.fail("a malformed number in a field")
			}
			p.fbuf = append(p.fbuf, tok{start: int32(j), end: int32(e), line: int32(line), kind: tNumber})
			j = e
		default:
			kind, n := operator(src[:end], j)
			switch kind {
			case 0:
				p.fail("a character Python has no token for")
			case oLpar, oLsqb, oLbrace:
				depth++
			case oRpar, oRsqb, oRbrace:
				if depth--; depth < 0 {
					p.fail("an unmatched bracket in a field")
				}
			}
			p.fbuf = append(p.fbuf, tok{start: int32(j), end: int32(j + n), line: int32(line), kind: kind})
			j += n
		}
	}
	p.fieldExpr(base, j, line)

	if src[j] == '=' { // f"{x=}"
		j++
		for j < end && (src[j] == ' ' || src[j] == '\t') {
			j++
		}
	}
	if j < end && src[j] == '!' {
		if c := byteAt(src[:end], j+1); c != 's' && c != 'r' && c != 'a' {
			p.fail("a conversion")
		}
		if c := byteAt(src[:end], j+2); c != ':' && c != '}' {
			p.fail("a conversion")
		}
		j += 2
	}
	if j < end && src[j] == ':' {
		j++
		if byteAt(src[:end], j) == '=' {
			p.fail("a format spec that starts with =") // tree-sitter reads := there
		}
		for j < end && src[j] != '}' {
			switch src[j] {
			case '\n', '\r', '\\':
				p.fail("a line break or backslash in a format spec")
			case '{':
				if nest > 0 || byteAt(src[:end], j+1) == '{' {
					p.fail("a field nested too deeply")
				}
				j = p.field(j+1, end, line, nest+1)
				continue
			}
			j++
		}
	}
	if j >= end || src[j] != '}' {
		p.fail("an unterminated field")
	}
	return j + 1
}

// fieldExpr parses the tokens of a field's expression, p.fbuf[base:], which ends at off.
func (p *parser) fieldExpr(base, off, line int) {
	if len(p.fbuf) == base {
		p.fail("an empty field")
	}
	p.fbuf = append(p.fbuf, tok{start: int32(off), end: int32(off), line: int32(line), kind: tEOF})
	toks := p.fbuf[base:]
	saved, savedI, savedEnd := p.toks, p.i, p.lastEnd
	p.toks, p.i = toks, 0
	switch p.kind() {
	case kYield, kLambda:
		p.fail("yield or lambda in a field")
	}
	p.exprList()
	if p.kind() != tEOF {
		p.fail("a field")
	}
	p.toks, p.i, p.lastEnd = saved, savedI, savedEnd
	p.ftoks = append(p.ftoks, toks[:len(toks)-1]...)
	p.fbuf = p.fbuf[:base]
}

// stringEnd returns where the string literal whose quote is at src[i] ends, if it ends before
// end on its line (or lines, triple-quoted); -1 otherwise.
func stringEnd(src []byte, i, end int) int {
	q := src[i]
	triple := i+2 < end && src[i+1] == q && src[i+2] == q
	j := i + 1
	if triple {
		j = i + 3
	}
	for j < end {
		switch c := src[j]; {
		case c == '\\':
			j += 2
		case c == q:
			if !triple {
				return j + 1
			}
			if j+2 < end && src[j+1] == q && src[j+2] == q {
				return j + 3
			}
			j++
		case c == '\n' || c == '\r':
			if !triple {
				return -1
			}
			j++
		default:
			j++
		}
	}
	return -1
}
