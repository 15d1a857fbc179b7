package router

// The fast path's tokens. The scan (scan.go) already walks every byte of the source with CPython's
// lexical rules to check syntax; given a lexOut it also hands out the tokens it reads, so the
// fast path (fast.go) costs one pass of lexing, not two. The scan's pieces are rough (it reads
// "1.5e-3" as four pieces and "**=" as three), so the emitter re-reads numbers and operators at
// their first piece and drops the pieces inside them.

// tokKind is a token's kind: the structural tokens, names, literals, one kind per keyword and
// per operator.
type tokKind uint8

const (
	tEOF tokKind = iota
	tNewline
	tIndent
	tDedent
	tName
	tNumber
	tString

	// Keywords (hard keywords of Python 3; match, case, type, print and exec are names).
	kFalse
	kNone
	kTrue
	kAnd
	kAs
	kAssert
	kAsync
	kAwait
	kBreak
	kClass
	kContinue
	kDef
	kDel
	kElif
	kElse
	kExcept
	kFinally
	kFor
	kFrom
	kGlobal
	kIf
	kImport
	kIn
	kIs
	kLambda
	kNonlocal
	kNot
	kOr
	kPass
	kRaise
	kReturn
	kTry
	kWhile
	kWith
	kYield

	// Operators and delimiters.
	oLpar
	oRpar
	oLsqb
	oRsqb
	oLbrace
	oRbrace
	oComma
	oColon
	oSemi
	oDot
	oEllipsis
	oAssign   // =
	oWalrus   // :=
	oArrow    // ->
	oAugment  // += -= *= /= //= %= **= @= &= |= ^= <<= >>=
	oStar     // *
	oPow      // **
	oAt       // @
	oPlus     // +
	oMinus    // -
	oTilde    // ~
	oSlash    // /
	oFloorDiv // //
	oPercent  // %
	oPipe     // |
	oAmp      // &
	oCaret    // ^
	oShiftL   // <<
	oShiftR   // >>
	oLt       // <
	oGt       // >
	oEq       // ==
	oNe       // !=
	oLe       // <=
	oGe       // >=
)

// tok is one token: its byte range and 0-based line.
type tok struct {
	start, end, line int32
	kind             tokKind
}

// comment is a comment in the source. indent is its column as tree-sitter counts it (a tab is 8)
// when nothing but blanks precede it on its line, else -1.
type comment struct {
	start, end, line, indent int32
}

// lexOut collects what the scan reads, for the fast path.
type lexOut struct {
	toks     []tok
	comments []comment
	// conts are the offsets of line continuations (a backslash before a line break), which
	// tree-sitter makes nodes, as it does comments.
	conts []int32
	// skip: pieces the scan reads before this offset belong to the last token.
	skip int
	// needNL: a token was emitted since the last NEWLINE.
	needNL bool
	// unsure says why the tokens cannot be trusted to match the tree-sitter grammar's reading
	// (a tab in an indentation, a non-ASCII name, a character Python has no token for); "" if
	// they can.
	unsure string
}

func (o *lexOut) doubt(why string) {
	if o.unsure == "" {
		o.unsure = why
	}
}

func (o *lexOut) emit(kind tokKind, start, end, line int) {
	o.toks = append(o.toks, tok{start: int32(start), end: int32(end), line: int32(line), kind: kind})
	if kind > tDedent {
		o.needNL = true
	}
}

// keywords maps the hard keywords to their kinds.
func keyword(w []byte) tokKind {
	switch string(w) {
	case "False":
		return kFalse
	case "None":
		return kNone
	case "True":
		return kTrue
	case "and":
		return kAnd
	case "as":
		return kAs
	case "assert":
		return kAssert
	case "async":
		return kAsync
	case "await":
		return kAwait
	case "break":
		return kBreak
	case "class":
		return kClass
	case "continue":
		return kContinue
	case "def":
		return kDef
	case "del":
		return kDel
	case "elif":
		return kElif
	case "else":
		return kElse
	case "except":
		return kExcept
	case "finally":
		return kFinally
	case "for":
		return kFor
	case "from":
		return kFrom
	case "global":
		return kGlobal
	case "if":
		return kIf
	case "import":
		return kImport
	case "in":
		return kIn
	case "is":
		return kIs
	case "lambda":
		return kLambda
	case "nonlocal":
		return kNonlocal
	case "not":
		return kNot
	case "or":
		return kOr
	case "pass":
		return kPass
	case "raise":
		return kRaise
	case "return":
		return kReturn
	case "try":
		return kTry
	case "while":
		return kWhile
	case "with":
		return kWith
	case "yield":
		return kYield
	}
	return tName
}

// isStringPrefix reports whether w is a string prefix Python 3.11 accepts (r, u, b, f and their
// pairs br, rb, fr, rf, in any case).
func isStringPrefix(w []byte) bool {
	switch len(w) {
	case 1:
		switch w[0] | 0x20 {
		case 'r', 'u', 'b', 'f':
			return true
		}
	case 2:
		a, b := w[0]|0x20, w[1]|0x20
		return a == 'r' && (b == 'b' || b == 'f') || b == 'r' && (a == 'b' || a == 'f')
	}
	return false
}

// wordToken classifies a run of word bytes: a keyword, a name or a number. For a number it
// returns where the number ends, which may be past the run ("1.5", "1e-3") or before it
// ("1if", which is left unsure).
func wordToken(src []byte, start, end int) (kind tokKind, tokEnd int, ok bool) {
	c := src[start]
	if c >= '0' && c <= '9' {
		n := numberEnd(src, start)
		if n < 0 || n < end || n < len(src) && isWordByte(src[n]) {
			return tNumber, end, false
		}
		return tNumber, n, true
	}
	for _, b := range src[start:end] {
		if b >= 0x80 {
			// tree-sitter takes names by XID_Start/XID_Continue; rather than carry those tables,
			// non-ASCII names go to the grammar.
			return tName, end, false
		}
	}
	return keyword(src[start:end]), end, true
}

// numberEnd returns where the number literal starting at i ends, by Python 3.11's rules, or -1
// if it is malformed.
func numberEnd(src []byte, i int) int {
	if byteAt(src, i) == '0' {
		switch byteAt(src, i+1) | 0x20 {
		case 'x', 'o', 'b':
			base := byteAt(src, i+1) | 0x20
			j := i + 2
			if byteAt(src, j) == '_' {
				j++
			}
			return digitsEnd(src, j, base)
		}
	}
	j := i
	if byteAt(src, j) != '.' {
		if j = digitsEnd(src, i, 'd'); j < 0 {
			return -1
		}
	}
	intOnly := true
	if byteAt(src, j) == '.' {
		if k := digitsEnd(src, j+1, 'd'); k >= 0 {
			j = k
		} else if j == i {
			return -1 // a lone "."
		} else {
			j++ // "1."
		}
		intOnly = false
	}
	if byteAt(src, j)|0x20 == 'e' {
		k := j + 1
		if c := byteAt(src, k); c == '+' || c == '-' {
			k++
		}
		if k = digitsEnd(src, k, 'd'); k < 0 {
			return -1
		}
		j, intOnly = k, false
	}
	if intOnly && src[i] == '0' {
		// "0", "00", "0_0": a decimal integer may start with 0 only if it is all zeros.
		for _, c := range src[i:j] {
			if c != '0' && c != '_' {
				return -1
			}
		}
	}
	if byteAt(src, j)|0x20 == 'j' {
		j++
	}
	return j
}

func byteAt(src []byte, i int) byte {
	if i < len(src) {
		return src[i]
	}
	return 0
}

// digitsEnd reads digit (['_'] digit)* from i in a base ('x', 'o', 'b', or 'd' for decimal);
// -1 if there is no digit at i.
func digitsEnd(src []byte, i int, base byte) int {
	if !isDigit(byteAt(src, i), base) {
		return -1
	}
	for i++; ; {
		switch {
		case isDigit(byteAt(src, i), base):
			i++
		case byteAt(src, i) == '_' && isDigit(byteAt(src, i+1), base):
			i += 2
		default:
			return i
		}
	}
}

func isDigit(c, base byte) bool {
	switch base {
	case 'x':
		return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
	case 'o':
		return c >= '0' && c <= '7'
	case 'b':
		return c == '0' || c == '1'
	}
	return c >= '0' && c <= '9'
}

// operator returns the operator at src[i] (longest match) and its length, or 0 if Python has
// none there ("!", "$", "?", "`", control characters).
func operator(src []byte, i int) (tokKind, int) {
	at := func(j int) byte {
		if i+j < len(src) {
			return src[i+j]
		}
		return 0
	}
	c, d := at(0), at(1)
	switch c {
	case ',':
		return oComma, 1
	case ';':
		return oSemi, 1
	case '~':
		return oTilde, 1
	case '.':
		if d == '.' && at(2) == '.' {
			return oEllipsis, 3
		}
		return oDot, 1
	case ':':
		if d == '=' {
			return oWalrus, 2
		}
		return oColon, 1
	case '=':
		if d == '=' {
			return oEq, 2
		}
		return oAssign, 1
	case '!':
		if d == '=' {
			return oNe, 2
		}
		return 0, 0
	case '-':
		switch d {
		case '>':
			return oArrow, 2
		case '=':
			return oAugment, 2
		}
		return oMinus, 1
	case '+', '%', '&', '|', '^', '@':
		if d == '=' {
			return oAugment, 2
		}
		switch c {
		case '+':
			return oPlus, 1
		case '%':
			return oPercent, 1
		case '&':
			return oAmp, 1
		case '|':
			return oPipe, 1
		case '^':
			return oCaret, 1
		}
		return oAt, 1
	case '*', '/', '<', '>':
		if d == c {
			if at(2) == '=' {
				return oAugment, 3
			}
			switch c {
			case '*':
				return oPow, 2
			case '/':
				return oFloorDiv, 2
			case '<':
				return oShiftL, 2
			}
			return oShiftR, 2
		}
		switch {
		case d == '=' && (c == '*' || c == '/'):
			return oAugment, 2
		case d == '=' && c == '<':
			return oLe, 2
		case d == '=':
			return oGe, 2
		case c == '<' && d == '>':
			return 0, 0 // Python 2's <>: tree-sitter reads it, CPython does not
		case c == '*':
			return oStar, 1
		case c == '/':
			return oSlash, 1
		case c == '<':
			return oLt, 1
		}
		return oGt, 1
	case '(':
		return oLpar, 1
	case ')':
		return oRpar, 1
	case '[':
		return oLsqb, 1
	case ']':
		return oRsqb, 1
	case '{':
		return oLbrace, 1
	case '}':
		return oRbrace, 1
	}
	return 0, 0
}
