package router

// The scan's hooks that hand its tokens to the fast path (lex.go). Each is called only when the
// scan has a lexOut, and none changes what the scan decides.

// scanTokens runs the scan and collects the tokens it reads.
func scanTokens(src []byte, out *lexOut) scanResult {
	s := scanner{src: src, ind: []int{0}, alt: []int{0}, res: scanResult{oddIndent: map[int32]bool{}}, out: out}
	s.run()
	return s.res
}

// emitIndentation records the indentation of a line of code that starts a logical line: ws are
// its leading blanks, col its width, pushed whether it opens a block, popped how many blocks it
// closes.
func (s *scanner) emitIndentation(ws []byte, col int, pushed bool, popped int) {
	o := s.out
	for _, c := range ws {
		if c != ' ' {
			// tree-sitter counts a tab as 8 columns where CPython moves to the next multiple of
			// 8, and a form feed differently again: their blocks can differ.
			o.doubt("a tab or form feed in an indentation")
			break
		}
	}
	if col > 255 {
		o.doubt("an indentation past 255 columns") // tree-sitter keeps indentations in a byte
	}
	at := s.pos
	if pushed {
		o.emit(tIndent, at, at, s.line)
	}
	for range popped {
		o.emit(tDedent, at, at, s.line)
	}
}

// continuedBlank checks a blank or comment line inside a logical line (in brackets, or after a
// backslash) whose leading blanks are ws. tree-sitter's scanner reads a line that starts left of
// the block as a dedent wherever the grammar expects no closing bracket (after an operator, say):
// a valid line, read as an error. scan.go flags such lines of code (oddIndent); comment lines are
// flagged here, and any blank line after a backslash.
func (s *scanner) continuedBlank(ws []byte, comment bool) {
	if s.cont {
		s.out.doubt("a blank or comment line after a line continuation")
		return
	}
	if !comment {
		return
	}
	indent := 0
	for _, c := range ws {
		switch c {
		case ' ':
			indent++
		case '\t':
			indent += 8
		default:
			s.out.doubt("a form feed before a comment")
		}
	}
	if indent < s.logicalIndent {
		s.out.doubt("a comment line dedented inside brackets")
	}
}

// emitWord records the run of word bytes from start to s.pos: a name, a keyword or a number.
func (s *scanner) emitWord(start int) {
	o := s.out
	if start < o.skip {
		return
	}
	kind, end, ok := wordToken(s.src, start, s.pos)
	if !ok {
		o.doubt("a malformed number or a non-ASCII name")
	}
	o.emit(kind, start, end, s.line)
	if end > s.pos {
		o.skip = end
	}
}

// emitOp records the operator or delimiter at s.pos (a number if it is a "." before a digit).
func (s *scanner) emitOp() {
	o := s.out
	at := s.pos
	if at < o.skip {
		return
	}
	if s.src[at] == '.' && isDigit(byteAt(s.src, at+1), 'd') {
		end := numberEnd(s.src, at)
		if end < 0 || isWordByte(byteAt(s.src, end)) {
			o.doubt("a malformed number")
			end = at + 1
		}
		o.emit(tNumber, at, end, s.line)
		o.skip = end
		return
	}
	kind, n := operator(s.src, at)
	if n == 0 {
		o.doubt("a character Python has no token for")
		n = 1
	}
	o.emit(kind, at, at+n, s.line)
	o.skip = at + n
}

// emitString records the string literal from the quote at q to s.pos, with its prefix if the
// last token is one ending at the quote.
func (s *scanner) emitString(q, line int) {
	o := s.out
	if n := len(o.toks); n > 0 {
		last := &o.toks[n-1]
		if int(last.end) == q && last.kind == tName && isStringPrefix(s.src[last.start:last.end]) {
			last.kind, last.end = tString, int32(s.pos)
			return
		}
	}
	o.emit(tString, q, s.pos, line)
}

// emitComment records the comment from start to s.pos.
func (s *scanner) emitComment(start int) {
	indent := int32(0)
	for _, c := range s.src[s.lineStart:start] {
		if c == ' ' {
			indent++
		} else if c == '\t' {
			indent += 8
		} else {
			if c == '\f' || c == '\v' {
				s.out.doubt("a form feed before a comment")
			}
			indent = -1
			break
		}
	}
	s.out.comments = append(s.out.comments, comment{start: int32(start), end: int32(s.pos), line: int32(s.line), indent: indent})
}

// emitNewline records the end of a logical line at s.pos, if it had tokens.
func (s *scanner) emitNewline() {
	if o := s.out; o.needNL {
		o.emit(tNewline, s.pos, s.pos, s.line)
		o.needNL = false
	}
}

// emitEnd closes the token stream: the last logical line, its open blocks, the end.
func (s *scanner) emitEnd() {
	o, n := s.out, len(s.src)
	if o.needNL {
		o.emit(tNewline, n, n, s.line)
		o.needNL = false
	}
	for range len(s.ind) - 1 {
		o.emit(tDedent, n, n, s.line)
	}
	o.emit(tEOF, n, n, s.line)
}
