package router

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// scanResult is what the lexical scan learns about the source: the first error CPython's
// tokenizer (or its indentation rules) would raise, and, per line, facts the tree-sitter error
// check needs.
type scanResult struct {
	// lexErr is a tokenizer error: CPython reports it before any parser error, wherever it is.
	lexErr *SyntaxError
	// blockErr is an indentation error of the parser ("unexpected indent", "expected an
	// indented block"); it competes with the grammar's errors by position.
	blockErr *SyntaxError
	// unclosed is the innermost bracket still open at the end of the source, if any.
	unclosed *bracket
	// logical maps each line (0-based) to the first line of its logical line.
	logical []int32
	// oddIndent marks logical lines (by first line) that have a continuation line, inside
	// brackets, indented less than their first line: tree-sitter-python's scanner emits
	// dedents there (valid Python, reported by tree-sitter as an error).
	oddIndent map[int32]bool
}

type bracket struct {
	ch        byte
	line, col int // 0-based line, byte column
}

const maxNesting = 200 // CPython's MAXLEVEL

// scan runs CPython 3.11's lexical rules over src: strings (all prefixes, single and triple
// quoted), comments, brackets, backslash continuations and the indentation stack (with its tab
// consistency check), plus the two indentation rules of the parser: an indented line must follow
// a line ending in ':', and such a line must be followed by an indented one. It stops at the
// first tokenizer error.
func scan(src []byte) scanResult {
	s := scanner{src: src, ind: []int{0}, alt: []int{0}, res: scanResult{oddIndent: map[int32]bool{}}}
	s.run()
	return s.res
}

type scanner struct {
	src  []byte
	pos  int
	line int // 0-based
	// lineStart is the byte offset of the current line.
	lineStart int
	res       scanResult

	brackets []bracket
	ind, alt []int // indentation stacks: tab size 8 and tab size 1
	// cont: the previous line ended with a backslash.
	cont bool
	// logicalStart is the first line of the current logical line, logicalIndent its indentation.
	logicalStart, logicalIndent int
	// lastColon: the last significant token of the current logical line was ':'.
	lastColon, sawToken bool
	// firstWord is the first word of the current logical line; header the first word of the
	// last logical line that ended with ':' and still waits for its block. Both point into src:
	// the error message that names the header is made only if there is an error.
	firstWord   []byte
	header      []byte
	headerLine  int
	pendingBody bool
	// lastLine is the last line with anything but whitespace, for errors at the end of the
	// source.
	lastLine int
	// started: startLine ran for the current line.
	started bool
	// out collects the tokens for the fast path; nil when only the checks are wanted.
	out *lexOut
}

func (s *scanner) run() {
	for s.pos < len(s.src) {
		if s.atLineStart() {
			if s.startLine() {
				return
			}
			continue
		}
		if s.token() {
			return
		}
	}
	s.endOfSource()
}

func (s *scanner) atLineStart() bool { return s.pos == s.lineStart && !s.started }

// startLine handles indentation at the start of a physical line. It reports whether scanning
// must stop (an error). It consumes the line's leading whitespace.
func (s *scanner) startLine() bool {
	s.started = true
	s.res.logical = append(s.res.logical, int32(s.logicalStart))
	col, alt, p := 0, 0, s.pos
	for ; p < len(s.src); p++ {
		switch s.src[p] {
		case ' ':
			col++
			alt++
		case '\t':
			col = (col/8 + 1) * 8
			alt++
		case '\f':
			col, alt = 0, 0
		default:
			goto done
		}
	}
done:
	s.pos = p
	blank := p >= len(s.src) || s.src[p] == '#' || s.src[p] == '\n' || s.src[p] == '\r'
	if p < len(s.src) && s.src[p] == '#' {
		s.lastLine = s.line
	}
	if len(s.brackets) > 0 || s.cont {
		// A continuation line: its indentation means nothing to Python.
		s.res.logical[s.line] = int32(s.logicalStart)
		if !blank && len(s.brackets) > 0 && col < s.logicalIndent {
			s.res.oddIndent[int32(s.logicalStart)] = true
		}
		if s.out != nil && blank {
			s.continuedBlank(s.src[s.lineStart:p], p < len(s.src) && s.src[p] == '#')
		}
		s.cont = false
		if !blank {
			s.lastLine = s.line
		}
		return false
	}
	s.logicalStart, s.logicalIndent = s.line, col
	s.res.logical[s.line] = int32(s.line)
	s.sawToken, s.lastColon, s.firstWord = false, false, nil
	if blank {
		return false
	}
	s.lastLine = s.line
	top := len(s.ind) - 1
	tabErr := func() bool {
		s.res.lexErr = s.errAt("TabError", "inconsistent use of tabs and spaces in indentation", s.line, 1)
		return true
	}
	pushed, popped := false, 0
	switch {
	case col == s.ind[top]:
		if alt != s.alt[top] {
			return tabErr()
		}
		if s.pendingBody {
			s.expectedBlock(s.line, p-s.lineStart)
		}
	case col > s.ind[top]:
		if alt <= s.alt[top] {
			return tabErr()
		}
		if len(s.ind) >= 100 { // CPython's MAXINDENT
			s.res.lexErr = s.errAt("IndentationError", "too many levels of indentation", s.line, col+1)
			return true
		}
		s.ind, s.alt = append(s.ind, col), append(s.alt, alt)
		pushed = true
		if !s.pendingBody && s.res.blockErr == nil {
			s.res.blockErr = s.errAt("IndentationError", "unexpected indent", s.line, col)
		}
	default:
		if s.pendingBody {
			s.expectedBlock(s.line, p-s.lineStart)
		}
		for top > 0 && col < s.ind[top] {
			top--
		}
		popped = len(s.ind) - (top + 1)
		s.ind, s.alt = s.ind[:top+1], s.alt[:top+1]
		if col != s.ind[top] {
			s.res.lexErr = s.errAt("IndentationError", "unindent does not match any outer indentation level", s.line, s.lineLen(s.line)+1)
			return true
		}
		if alt != s.alt[top] {
			return tabErr()
		}
	}
	if s.out != nil {
		s.emitIndentation(s.src[s.lineStart:p], col, pushed, popped)
	}
	s.pendingBody = false
	return false
}

// expectedBlock records that the block of the last header is missing; byteCol is where the line
// that should have been indented starts.
func (s *scanner) expectedBlock(line, byteCol int) {
	s.pendingBody = false
	if s.res.blockErr != nil {
		return
	}
	s.res.blockErr = s.errAt("IndentationError", fmt.Sprintf("expected an indented block after %s on line %d", headerName(string(s.header)), s.headerLine+1), line, s.charCol(line, byteCol)+1)
}

// token consumes one token (or a run of insignificant characters) and reports whether scanning
// must stop.
func (s *scanner) token() bool {
	c := s.src[s.pos]
	switch {
	case c == ' ' || c == '\t' || c == '\f':
		for s.pos++; s.pos < len(s.src); s.pos++ {
			if c := s.src[s.pos]; c != ' ' && c != '\t' && c != '\f' {
				break
			}
		}
	case c == '#':
		start := s.pos
		for s.pos < len(s.src) && s.src[s.pos] != '\n' && s.src[s.pos] != '\r' {
			s.pos++
		}
		if s.out != nil {
			s.emitComment(start)
		}
	case c == '\n' || c == '\r':
		s.newline()
	case c == '\\':
		n := s.pos + 1
		if n < len(s.src) && (s.src[n] == '\n' || s.src[n] == '\r') {
			if s.out != nil {
				s.out.conts = append(s.out.conts, int32(s.pos))
			}
			s.pos = n
			s.cont = true
			s.newline()
			return false
		}
		if n >= len(s.src) {
			// "unexpected EOF while parsing": left to the grammar check.
			s.pos = n
			if s.out != nil {
				s.out.doubt("a line continuation at the end of the source")
			}
			return false
		}
		s.res.lexErr = s.errAt("SyntaxError", "unexpected character after line continuation character", s.line, s.charCol(s.line, n-s.lineStart)+1)
		return true
	case c == '"' || c == '\'':
		return s.str()
	case c == '(' || c == '[' || c == '{':
		if len(s.brackets) >= maxNesting {
			s.res.lexErr = s.errAt("SyntaxError", "too many nested parentheses", s.line, s.charCol(s.line, s.pos-s.lineStart)+1)
			return true
		}
		s.brackets = append(s.brackets, bracket{c, s.line, s.pos - s.lineStart})
		s.significant(c)
		if s.out != nil {
			s.emitOp()
		}
		s.pos++
	case c == ')' || c == ']' || c == '}':
		col := func() int { return s.charCol(s.line, s.pos-s.lineStart) + 1 } // errors only: it costs a line search
		if len(s.brackets) == 0 {
			s.res.lexErr = s.errAt("SyntaxError", fmt.Sprintf("unmatched '%c'", c), s.line, col())
			return true
		}
		open := s.brackets[len(s.brackets)-1]
		if open.ch != opening(c) {
			msg := fmt.Sprintf("closing parenthesis '%c' does not match opening parenthesis '%c'", c, open.ch)
			if open.line != s.line {
				msg += fmt.Sprintf(" on line %d", open.line+1)
			}
			s.res.lexErr = s.errAt("SyntaxError", msg, s.line, col())
			return true
		}
		s.brackets = s.brackets[:len(s.brackets)-1]
		s.significant(c)
		if s.out != nil {
			s.emitOp()
		}
		s.pos++
	case isWordByte(c):
		start := s.pos
		for s.pos < len(s.src) && isWordByte(s.src[s.pos]) {
			s.pos++
		}
		if !s.sawToken && len(s.brackets) == 0 {
			s.firstWord = s.src[start:s.pos]
		}
		s.significant('a')
		if s.out != nil {
			s.emitWord(start)
		}
	default:
		s.significant(c)
		if s.out != nil {
			s.emitOp()
		}
		s.pos++
	}
	return false
}

func opening(c byte) byte {
	switch c {
	case ')':
		return '('
	case ']':
		return '['
	}
	return '{'
}

// isWordByte reports bytes of identifiers, keywords and numbers (non-ASCII letters included:
// their validity is the grammar check's business).
func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func (s *scanner) significant(c byte) {
	s.sawToken = true
	s.lastColon = c == ':' && len(s.brackets) == 0
}

// newline consumes a line break at s.pos and ends the logical line unless it continues.
func (s *scanner) newline() {
	if s.out != nil && len(s.brackets) == 0 && !s.cont {
		s.emitNewline()
	}
	if s.src[s.pos] == '\r' && s.pos+1 < len(s.src) && s.src[s.pos+1] == '\n' {
		s.pos++
	}
	s.pos++
	if len(s.brackets) == 0 && !s.cont && s.sawToken {
		if s.lastColon {
			s.pendingBody = true
			s.header, s.headerLine = s.firstWord, s.logicalStart
		}
	}
	s.line++
	s.lineStart = s.pos
	s.started = false
}

// headerName says what a block header is, as CPython's message does.
func headerName(word string) string {
	switch word {
	case "def":
		return "function definition"
	case "class":
		return "class definition"
	case "":
		return "statement"
	}
	return fmt.Sprintf("'%s' statement", word)
}

// str consumes a string literal starting at s.pos (its prefix letters, if any, were consumed as
// a word) and reports whether scanning must stop.
func (s *scanner) str() bool {
	q := s.src[s.pos]
	qpos := s.pos
	startLine, startCol := s.line, s.pos-s.lineStart
	triple := s.pos+2 < len(s.src) && s.src[s.pos+1] == q && s.src[s.pos+2] == q
	s.significant(q)
	if triple {
		s.pos += 3
	} else {
		s.pos++
	}
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '\\':
			s.pos++
			if s.pos < len(s.src) && (s.src[s.pos] == '\n' || s.src[s.pos] == '\r') {
				s.lineBreakInString()
				continue
			}
			s.pos++
		case c == q:
			if !triple {
				s.pos++
				if s.out != nil {
					s.emitString(qpos, startLine)
				}
				return false
			}
			if s.pos+2 < len(s.src) && s.src[s.pos+1] == q && s.src[s.pos+2] == q {
				s.pos += 3
				if s.out != nil {
					s.emitString(qpos, startLine)
				}
				return false
			}
			s.pos++
		case c == '\n' || c == '\r':
			if !triple {
				s.res.lexErr = s.errAt("SyntaxError", fmt.Sprintf("unterminated string literal (detected at line %d)", s.line+1), startLine, s.charCol(startLine, startCol)+1)
				return true
			}
			s.lineBreakInString()
		default:
			s.pos++
		}
	}
	// At the end of the source: CPython counts the line the last character is on.
	end := s.line + 1
	if n := len(s.src); n > 0 && (s.src[n-1] == '\n' || s.src[n-1] == '\r') {
		end = s.line
	}
	if triple {
		s.res.lexErr = s.errAt("SyntaxError", fmt.Sprintf("unterminated triple-quoted string literal (detected at line %d)", end), startLine, s.charCol(startLine, startCol)+1)
	} else {
		s.res.lexErr = s.errAt("SyntaxError", fmt.Sprintf("unterminated string literal (detected at line %d)", end), startLine, s.charCol(startLine, startCol)+1)
	}
	return true
}

// lineBreakInString consumes a line break inside a string: the next line belongs to the same
// logical line.
func (s *scanner) lineBreakInString() {
	if s.src[s.pos] == '\r' && s.pos+1 < len(s.src) && s.src[s.pos+1] == '\n' {
		s.pos++
	}
	s.pos++
	s.line++
	s.lineStart = s.pos
	s.res.logical = append(s.res.logical, int32(s.logicalStart))
	s.lastLine = s.line
	s.started = true
}

func (s *scanner) endOfSource() {
	if s.out != nil {
		s.emitEnd()
	}
	// Lines not reached (a source ending in a line break) still get an entry.
	if len(s.res.logical) <= s.line {
		s.res.logical = append(s.res.logical, int32(s.logicalStart))
	}
	if n := len(s.brackets); n > 0 {
		b := s.brackets[n-1]
		s.res.unclosed = &b
		return
	}
	if s.sawToken && s.lastColon && !s.cont {
		// The source ends on a header line without a line break.
		s.pendingBody = true
		s.header, s.headerLine = s.firstWord, s.logicalStart
	}
	if s.pendingBody {
		s.expectedBlock(s.lastLine, len(s.lineText(s.lastLine)))
	}
}

// errAt builds an error at a 0-based line and a CPython offset (1-based characters).
func (s *scanner) errAt(name, msg string, line, offset int) *SyntaxError {
	return &SyntaxError{Name: name, Msg: msg, Line: line + 1, Column: offset, Text: string(s.lineText(line))}
}

// lineText returns line (0-based) without its line break.
func (s *scanner) lineText(line int) []byte {
	return lineOf(s.src, line)
}

func (s *scanner) lineLen(line int) int { return utf8.RuneCount(s.lineText(line)) }

// charCol turns a byte column of a line into a 0-based character column.
func (s *scanner) charCol(line, byteCol int) int {
	t := s.lineText(line)
	if byteCol > len(t) {
		byteCol = len(t)
	}
	return utf8.RuneCount(t[:byteCol])
}

// lineOf returns the 0-based line of src without its line break.
func lineOf(src []byte, line int) []byte {
	start := 0
	for i := 0; i < line; i++ {
		j := indexNewline(src[start:])
		if j < 0 {
			return nil
		}
		start += j
		if src[start] == '\r' && start+1 < len(src) && src[start+1] == '\n' {
			start++
		}
		start++
	}
	rest := src[start:]
	if j := indexNewline(rest); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func indexNewline(b []byte) int {
	return bytes.IndexAny(b, "\r\n")
}
