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

// bail is the panic that stops a parse the parser cannot vouch for.
type bail struct{ why string }

func (p *parser) fail(why string) { panic(bail{why}) }

// maxDepth bounds the parser's recursion: code nested deeper (`not not not ...`, a chain of
// lambdas) goes to tree-sitter, under its time budget, rather than growing the stack unbounded.
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
