package router

import "slices"

// The fast parser's compound statements: if, for, try, with, def and class (while is read in
// statement), and the frames they open around what is found inside them.

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
		if first := p.peek(1); first == oStar || first == oPow || first == tName && p.peek(2) == oLsqb {
			// tree-sitter-python's return type may itself hold a colon (constrained_type), and
			// it reads `-> None: c[a]` on one line as one type (a generic after the colon),
			// then fails.
			p.fail("a return annotation before a body on the same line that starts with a[")
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
