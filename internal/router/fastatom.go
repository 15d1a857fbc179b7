package router

// The fast parser's atoms: names, literals, displays and comprehensions, and targets.

func (p *parser) atom() shape {
	switch p.kind() {
	case tName:
		p.next()
		return shName
	case tNumber, kTrue, kFalse, kNone, oEllipsis:
		p.next()
		return shOther
	case tString:
		for p.kind() == tString {
			p.stringAtom()
		}
		return shOther
	case oLpar:
		return p.parens()
	case oLsqb:
		return p.brackets()
	case oLbrace:
		p.braces()
		return shOther
	}
	p.fail("unexpected token")
	return shOther
}

// parens reads (), (yield), (expression), a tuple or a generator.
func (p *parser) parens() shape {
	p.enter()
	defer func() { p.depth-- }()
	p.next()
	switch p.kind() {
	case oRpar:
		p.next()
		return shTuple
	case kYield:
		p.yieldExpr()
		p.expect(oRpar)
		return shOther
	}
	star := p.kind() == oStar
	sh := p.element()
	if p.kind() == kFor || p.kind() == kAsync {
		if star {
			p.fail("*x in a comprehension")
		}
		p.comprehension()
		p.expect(oRpar)
		return shOther
	}
	if p.kind() == oRpar {
		if sh == shStar {
			p.fail("(*x)")
		}
		p.next()
		if sh.pattern() {
			return shTuple
		}
		return shOther
	}
	return p.rest(sh, oRpar)
}

// brackets reads a list display or a list comprehension.
func (p *parser) brackets() shape {
	p.enter()
	defer func() { p.depth-- }()
	p.next()
	if p.kind() == oRsqb {
		p.next()
		return shTuple
	}
	star := p.kind() == oStar
	sh := p.element()
	if p.kind() == kFor || p.kind() == kAsync {
		if star {
			p.fail("*x in a comprehension")
		}
		p.comprehension()
		p.expect(oRsqb)
		return shOther
	}
	return p.rest(sh, oRsqb)
}

// rest reads the elements of a display after its first, up to end.
func (p *parser) rest(first shape, end tokKind) shape {
	all := first.pattern()
	for p.kind() == oComma {
		p.next()
		if p.kind() == end {
			break
		}
		all = p.element().pattern() && all
	}
	p.expect(end)
	if all {
		return shTuple
	}
	return shOther
}

// braces reads a dict or set display or comprehension.
func (p *parser) braces() {
	p.enter()
	defer func() { p.depth-- }()
	p.next()
	switch p.kind() {
	case oRbrace:
		p.next()
		return
	case oPow:
		p.next()
		p.expr()
		p.dictRest()
		return
	case oStar:
		p.element()
		p.rest(shOther, oRbrace)
		return
	case kLambda:
		p.fail("lambda in braces") // a lambda key's colon and the pair's colon
	}
	p.expr()
	if p.kind() == oColon {
		p.next()
		p.expr()
		if p.kind() == kFor || p.kind() == kAsync {
			p.comprehension()
			p.expect(oRbrace)
			return
		}
		p.dictRest()
		return
	}
	if p.kind() == kFor || p.kind() == kAsync {
		p.comprehension()
		p.expect(oRbrace)
		return
	}
	p.rest(shOther, oRbrace)
}

func (p *parser) dictRest() {
	for p.kind() == oComma {
		p.next()
		switch p.kind() {
		case oRbrace:
			p.next()
			return
		case oPow:
			p.next()
			p.expr()
		case kLambda:
			p.fail("lambda as a key")
		default:
			p.expr()
			p.expect(oColon)
			p.expr()
		}
	}
	p.expect(oRbrace)
}

// comprehension reads for and if clauses; the iterable and the conditions are Python's
// disjunctions (no lambda, no conditional expression).
func (p *parser) comprehension() {
	for {
		switch p.kind() {
		case kAsync:
			p.next()
			fallthrough
		case kFor:
			p.expect(kFor)
			p.targetList()
			p.expect(kIn)
			p.orTest()
		case kIf:
			p.next()
			p.orTest()
		default:
			return
		}
	}
}

// targetList reads the targets of a for: target, target, ...
func (p *parser) targetList() {
	p.target(true)
	for p.kind() == oComma {
		p.next()
		if p.kind() == kIn {
			return
		}
		p.target(true)
	}
}

// target reads an assignment target (tree-sitter's pattern): a name, an attribute, a subscript,
// a parenthesized or bracketed list of them, or *target where star.
func (p *parser) target(star bool) {
	if star && p.kind() == oStar {
		p.next()
		if sh := p.primary(); sh != shName && sh != shTarget {
			p.fail("*target")
		}
		return
	}
	if !p.primary().pattern() {
		p.fail("target")
	}
}
