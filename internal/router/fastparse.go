package router

import (
	"bytes"
	"slices"
)

// parser reads the scan's tokens (lex.go) by a subset of tree-sitter-python's grammar: code it
// accepts is code tree-sitter parses without an error, with the same structure where the
// router's rules look (import statements, calls, try, with and if around them). Whatever falls
// outside the subset, or looks like a corner where tree-sitter reads Python wrongly, stops the
// parse (fail), and the router asks tree-sitter instead: the parser never guesses.
type parser struct {
	src      []byte
	toks     []tok
	i        int
	comments []comment
	conts    []int32
	depth    int
	// lastEnd is where the last real token read ends (not NEWLINE, INDENT or DEDENT).
	lastEnd int32

	// ftoks are the tokens of the f-strings' replacement fields, read when their string is
	// (fstring.go); fbuf is scratch for them.
	ftoks, fbuf []tok

	imports   []found // import statements, in order
	dunders   []found // __import__ calls, in order
	modules   []found // import_module calls, in order
	importlib []string
	// importSpans are the byte ranges of import statements, whose names are dotted names and
	// not attributes.
	importSpans [][2]int32

	frames  []frame // what encloses the current token
	arena   []frame // the frames of what was found
	cons    []construct
	clauses []clause
	conds   []condition
}

// found is an import statement or an import call, with what encloses it.
type found struct {
	imp            Import
	frameAt, nFram int32
	// For calls: dynamic when the name is not a literal; obj is the name of the object of
	// import_module when it is called as an attribute (then it must be an importlib name).
	dynamic bool
	viaObj  bool
	obj     string
}

// The kinds of frame.
const (
	frTry    uint8 = iota // the body of a try statement
	frExcept              // an except clause (its head and body)
	frWith                // the body of a with statement
	frIf                  // a branch of an if statement: part 0 its consequence, k its k-th elif, -1 its else
)

type frame struct {
	kind      uint8
	con, part int32
}

// construct is a try, with or if statement that encloses something found, and what has been
// judged of it (each judgment once: a statement may enclose many imports).
type construct struct {
	start, bodyStart int32 // with: where the statement and its body start
	first, last      int32 // try: its except clauses (a linked list); if: its condition
	elifs            []int32
	judged, verdict  bool  // try: catchesImportError; with: suppresses
	checked, isTrue  int32 // if: conditions judged true everywhere or not, the first that is (-1)
}

// clause is an except clause: its bytes as tree-sitter's node spans them, the tokens of the
// types it catches (from == to when it is bare), for a bare except the first comment before its
// block (tree-sitter makes that the clause's first named child), and the next clause.
type clause struct {
	start, end, from, to, comment, next int32
	judged, verdict                     bool // handlesImportError, not broad
}

// condition is an if or elif condition: its tokens, and how it was judged.
type condition struct {
	from, to      int32
	read, yes, no bool // yes, no: true, false on every target
}

// bail is the panic that stops a parse the parser cannot vouch for.
type bail struct{ why string }

func (p *parser) fail(why string) { panic(bail{why}) }

const maxDepth = 500

func (p *parser) tok() tok          { return p.toks[p.i] }
func (p *parser) kind() tokKind     { return p.toks[p.i].kind }
func (p *parser) text(t tok) string { return string(p.src[t.start:t.end]) }

func (p *parser) peek(n int) tokKind {
	if j := p.i + n; j < len(p.toks) {
		return p.toks[j].kind
	}
	return tEOF
}

func (p *parser) next() {
	t := &p.toks[p.i]
	if t.kind == tEOF {
		p.fail("unexpected end")
	}
	if t.kind > tDedent {
		p.lastEnd = t.end
	}
	p.i++
}

func (p *parser) expect(k tokKind) {
	if p.kind() != k {
		p.fail("unexpected token")
	}
	p.next()
}

func (p *parser) enter() {
	if p.depth++; p.depth > maxDepth {
		p.fail("nested too deeply")
	}
}

func (p *parser) file() {
	for p.kind() != tEOF {
		p.statement()
	}
}

func (p *parser) statement() {
	switch p.kind() {
	case kIf:
		p.ifStatement()
	case kWhile:
		p.next()
		p.expr()
		p.suite()
		if p.kind() == kElse {
			p.next()
			p.suite()
		}
	case kFor:
		p.forStatement()
	case kTry:
		p.tryStatement()
	case kWith:
		p.withStatement(p.tok().start)
	case kDef:
		p.funcDef()
	case kClass:
		p.classDef()
	case oAt:
		for p.kind() == oAt {
			p.next()
			p.expr()
			p.expect(tNewline)
			// After a decorator tree-sitter's scanner expects neither a newline nor a dedent,
			// and reads a comment line left of the block as a dedent.
			col := p.tok().start - int32(bytes.LastIndexByte(p.src[:p.tok().start], '\n')+1)
			for k := p.commentFrom(p.lastEnd); k < len(p.comments) && p.comments[k].start < p.tok().start; k++ {
				if c := p.comments[k]; c.indent >= 0 && c.indent < col {
					p.fail("a comment line left of a decorated definition")
				}
			}
		}
		switch p.kind() {
		case kDef:
			p.funcDef()
		case kClass:
			p.classDef()
		case kAsync:
			p.next()
			p.funcDef()
		default:
			p.fail("a decorator without a definition")
		}
	case kAsync:
		start := p.tok().start
		p.next()
		switch p.kind() {
		case kDef:
			p.funcDef()
		case kFor:
			p.forStatement()
		case kWith:
			p.withStatement(start)
		default:
			p.fail("async")
		}
	default:
		p.simpleStatements()
	}
}

// suiteInfo is where a block starts, where its last token ends, and its indentation (-1 when it
// is on its header's line).
type suiteInfo struct {
	start, last, indent int32
}

func (p *parser) suite() suiteInfo {
	p.expect(oColon)
	if p.kind() != tNewline {
		b := suiteInfo{start: p.tok().start, indent: -1}
		p.simpleStatements()
		b.last = p.lastEnd
		return b
	}
	p.next()
	if p.kind() != tIndent {
		p.fail("no indented block")
	}
	p.next()
	start := p.tok().start
	b := suiteInfo{start: start, indent: start - int32(bytes.LastIndexByte(p.src[:start], '\n')+1)}
	for p.kind() != tDedent {
		p.statement()
	}
	b.last = p.lastEnd
	p.next()
	return b
}

// blockEnd is where tree-sitter ends a block: after its last token and a comment on the same
// line; for an indented block, also after the comment lines that follow it indented at least as
// far (tree-sitter's scanner waits for them before it closes the block).
func (p *parser) blockEnd(b suiteInfo) int32 {
	end := b.last
	cs := p.comments
	k := p.commentFrom(end)
	if k < len(cs) && bytes.IndexByte(p.src[end:cs[k].start], '\n') < 0 {
		end = cs[k].end
		k++
	}
	if b.indent < 0 {
		return end
	}
	limit := int32(len(p.src))
	for j := p.i; j < len(p.toks); j++ {
		if t := p.toks[j]; t.kind > tDedent {
			limit = t.start
			break
		}
	}
	for ; k < len(cs) && cs[k].start < limit && cs[k].indent >= b.indent; k++ {
		end = cs[k].end
	}
	return end
}

// commentFrom returns the index of the first comment that starts at or after off.
func (p *parser) commentFrom(off int32) int {
	lo, hi := 0, len(p.comments)
	for lo < hi {
		m := (lo + hi) / 2
		if p.comments[m].start < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// extraIn reports whether a comment or a line continuation starts in [from, to): tree-sitter
// makes them nodes, named children of what holds them, where the rules count or take children.
func (p *parser) extraIn(from, to int32) bool {
	if k := p.commentFrom(from); k < len(p.comments) && p.comments[k].start < to {
		return true
	}
	k, _ := slices.BinarySearch(p.conts, from)
	return k < len(p.conts) && p.conts[k] < to
}

func (p *parser) simpleStatements() {
	for {
		p.simple()
		if p.kind() != oSemi {
			break
		}
		p.next()
		if p.kind() == tNewline {
			break
		}
	}
	p.expect(tNewline)
}

func (p *parser) simple() {
	switch p.kind() {
	case kImport:
		p.importStatement()
	case kFrom:
		p.fromStatement()
	case kPass, kBreak, kContinue:
		p.next()
	case kReturn:
		p.next()
		if p.startsExpr() {
			p.exprList()
		}
	case kRaise:
		p.next()
		if p.startsExpr() {
			p.exprList()
			if p.kind() == kFrom {
				p.next()
				p.expr()
			}
		}
	case kGlobal, kNonlocal:
		p.next()
		p.expect(tName)
		for p.kind() == oComma {
			p.next()
			p.expect(tName)
		}
	case kDel:
		p.next()
		p.exprList()
	case kAssert:
		p.next()
		p.expr()
		for p.kind() == oComma {
			p.next()
			p.expr()
		}
	default:
		p.exprStatement()
	}
}

func (p *parser) exprStatement() {
	if p.kind() == kYield {
		p.yieldExpr()
		return
	}
	sh, n, comma := p.exprList()
	switch p.kind() {
	case oAssign:
		for p.kind() == oAssign {
			if !sh.pattern() {
				p.fail("assignment to an expression")
			}
			p.next()
			if p.kind() == kYield {
				p.yieldExpr()
				return
			}
			sh, _, _ = p.exprList()
		}
	case oColon, oAugment:
		if n != 1 || comma || !sh.pattern() || sh == shStar {
			p.fail("annotation or augmented assignment of more than one target")
		}
		annotated := p.kind() == oColon
		p.next()
		if annotated {
			p.typeExpr()
			if p.kind() != oAssign {
				return
			}
			p.next()
		}
		if p.kind() == kYield {
			p.yieldExpr()
		} else {
			p.exprList()
		}
	}
}

func (p *parser) yieldExpr() {
	p.expect(kYield)
	if p.kind() == kFrom {
		p.next()
		p.expr()
	} else if p.startsExpr() {
		p.exprList()
	}
}

func (p *parser) ifStatement() {
	con := p.construct(p.tok().start)
	p.next()
	p.condition(con)
	p.frames = append(p.frames, frame{frIf, con, 0})
	p.suite()
	p.frames = p.frames[:len(p.frames)-1]
	for k := int32(1); p.kind() == kElif; k++ {
		p.frames = append(p.frames, frame{frIf, con, k})
		p.next()
		p.condition(con)
		p.suite()
		p.frames = p.frames[:len(p.frames)-1]
	}
	if p.kind() == kElse {
		p.next()
		p.frames = append(p.frames, frame{frIf, con, -1})
		p.suite()
		p.frames = p.frames[:len(p.frames)-1]
	}
}

// condition reads an if or elif condition and links it to its statement.
func (p *parser) condition(con int32) {
	from := p.i
	p.expr()
	p.conds = append(p.conds, condition{from: int32(from), to: int32(p.i)})
	ci := int32(len(p.conds) - 1)
	if c := &p.cons[con]; c.first < 0 {
		c.first = ci
	} else {
		c.elifs = append(c.elifs, ci)
	}
}

func (p *parser) construct(start int32) int32 {
	p.cons = append(p.cons, construct{start: start, first: -1, last: -1, isTrue: -1})
	return int32(len(p.cons) - 1)
}

func (p *parser) forStatement() {
	p.expect(kFor)
	p.targetList()
	p.expect(kIn)
	p.exprList()
	p.suite()
	if p.kind() == kElse {
		p.next()
		p.suite()
	}
}

func (p *parser) tryStatement() {
	con := p.construct(p.tok().start)
	p.next()
	p.frames = append(p.frames, frame{frTry, con, 0})
	p.suite()
	p.frames = p.frames[:len(p.frames)-1]
	handlers := 0
	for p.kind() == kExcept {
		exc := p.tok()
		p.next()
		if p.kind() == oStar {
			p.fail("except*") // tree-sitter reads "except *E" and "except* E" differently
		}
		p.clauses = append(p.clauses, clause{start: exc.start, comment: -1, next: -1})
		ci := int32(len(p.clauses) - 1)
		if c := &p.cons[con]; c.first < 0 {
			c.first = ci
		} else {
			p.clauses[c.last].next = ci
		}
		p.cons[con].last = ci
		p.frames = append(p.frames, frame{frExcept, con, ci})
		from, to := p.i, p.i
		if p.kind() != oColon {
			p.expr()
			to = p.i
			if p.kind() == kAs {
				p.next()
				p.expect(tName)
			}
		}
		colon := p.tok()
		if p.extraIn(exc.end, colon.start) {
			p.fail("a comment in the head of an except clause")
		}
		b := p.suite()
		if k, _ := slices.BinarySearch(p.conts, colon.end); k < len(p.conts) && p.conts[k] < b.start {
			p.fail("a line continuation after an except clause's colon") // its first named child
		}
		c := &p.clauses[ci]
		c.from, c.to, c.end = int32(from), int32(to), p.blockEnd(b)
		if from == to {
			if k := p.commentFrom(colon.end); k < len(p.comments) && p.comments[k].start < b.start {
				c.comment = int32(k)
			}
		}
		p.frames = p.frames[:len(p.frames)-1]
		handlers++
	}
	if handlers > 0 && p.kind() == kElse {
		p.next()
		p.suite()
	}
	if p.kind() == kFinally {
		p.next()
		p.suite()
	} else if handlers == 0 {
		p.fail("try without except or finally")
	}
}

func (p *parser) withStatement(start int32) {
	p.expect(kWith)
	if p.kind() == oLpar && p.parenthesizedItems() {
		p.next()
		for {
			p.withItem()
			if p.kind() != oComma {
				break
			}
			p.next()
			if p.kind() == oRpar {
				break
			}
		}
		p.expect(oRpar)
	} else {
		p.withItem()
		for p.kind() == oComma {
			p.next()
			p.withItem()
		}
	}
	con := p.construct(start)
	p.frames = append(p.frames, frame{frWith, con, 0})
	b := p.suite()
	p.frames = p.frames[:len(p.frames)-1]
	p.cons[con].bodyStart = b.start
}

// parenthesizedItems reports whether the parenthesis at the current token holds with items of
// their own (`with (open(a) as f, open(b) as g):`) rather than starting an expression.
func (p *parser) parenthesizedItems() bool {
	depth := 0
	for j := p.i; j < len(p.toks); j++ {
		switch p.toks[j].kind {
		case oLpar, oLsqb, oLbrace:
			depth++
		case oRpar, oRsqb, oRbrace:
			if depth--; depth == 0 {
				return false
			}
		case kAs:
			if depth == 1 {
				return true
			}
		case tNewline, tEOF:
			return false
		}
	}
	return false
}

func (p *parser) withItem() {
	p.expr()
	if p.kind() == kAs {
		p.next()
		p.target(false)
	}
}

func (p *parser) funcDef() {
	p.expect(kDef)
	p.expect(tName)
	if p.kind() != oLpar {
		p.fail("type parameters") // def f[T](): Python 3.12
	}
	p.next()
	p.parameters(oRpar, true)
	p.expect(oRpar)
	if p.kind() == oArrow {
		p.next()
		p.typeExpr()
		if p.peek(1) != tNewline {
			// tree-sitter-python's return type may itself hold a colon (constrained_type), and
			// it reads `-> None: c[a]` on one line as one type, then fails.
			p.fail("a return annotation before a body on the same line")
		}
	}
	p.suite()
}

// parameters reads a def's parameters (annotated) or a lambda's, up to end.
func (p *parser) parameters(end tokKind, annotated bool) {
	for p.kind() != end {
		switch p.kind() {
		case oSlash:
			p.next()
		case oStar:
			p.next()
			if p.kind() == tName {
				p.next()
				p.annotation(annotated)
			}
		case oPow:
			p.next()
			p.expect(tName)
			p.annotation(annotated)
		case tName:
			p.next()
			p.annotation(annotated)
			if p.kind() == oAssign {
				p.next()
				p.expr()
			}
		default:
			p.fail("parameter")
		}
		if p.kind() != oComma {
			break
		}
		p.next()
	}
}

func (p *parser) annotation(annotated bool) {
	if annotated && p.kind() == oColon {
		p.next()
		p.typeExpr()
	}
}

// typeExpr reads an annotation. tree-sitter-python reads annotations by a grammar of their own
// (type), in which a name followed by [ starts a generic type that may be followed only by |, .
// or the annotation's end: `x: a[b] + c` and `x: a[::2]` are errors to it. Annotations whose
// generics keep to that grammar (list[int] | None, Callable[[int], str], np.ndarray[int]) pass.
func (p *parser) typeExpr() {
	from := p.i
	p.expr()
	p.safeType(from, p.i)
}

// safeType checks the annotation in tokens [from, to): each operand of its top-level |.
func (p *parser) safeType(from, to int) {
	depth, start := 0, from
	for k := from; k <= to; k++ {
		if k == to || depth == 0 && p.toks[k].kind == oPipe {
			p.safeOperand(start, k)
			start = k + 1
			continue
		}
		switch p.toks[k].kind {
		case oLpar, oLsqb, oLbrace:
			depth++
		case oRpar, oRsqb, oRbrace:
			depth--
		}
	}
}

// safeOperand checks a name[...] at the start of an operand: name or dotted name, [types], then
// only .name to the end.
func (p *parser) safeOperand(from, to int) {
	k := from
	if k >= to || p.toks[k].kind != tName {
		return
	}
	for k+2 < to && p.toks[k+1].kind == oDot && p.toks[k+2].kind == tName {
		k += 2
	}
	if k+1 >= to || p.toks[k+1].kind != oLsqb {
		return
	}
	end := p.closing(k + 1)
	if end < 0 || end >= to {
		p.fail("an annotation")
	}
	for _, e := range p.split(k+2, end) {
		for j, depth := e[0], 0; j < e[1]; j++ {
			switch p.toks[j].kind {
			case oLpar, oLsqb, oLbrace:
				depth++
			case oRpar, oRsqb, oRbrace:
				depth--
			case oColon:
				if depth == 0 {
					p.fail("a slice in an annotation's generic")
				}
			}
		}
		p.safeType(e[0], e[1])
	}
	k = end + 1
	for k+1 < to && p.toks[k].kind == oDot && p.toks[k+1].kind == tName {
		k += 2
	}
	if k != to {
		p.fail("an annotation that goes on after a generic")
	}
}

func (p *parser) classDef() {
	p.expect(kClass)
	p.expect(tName)
	switch p.kind() {
	case oLsqb:
		p.fail("type parameters")
	case oLpar:
		p.arguments(false)
	}
	p.suite()
}
