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
