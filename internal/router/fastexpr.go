package router

// The fast path's expressions, by Python's precedence (which accepts what tree-sitter-python's
// precedences accept). A parse function returns the shape of what it read, so that a statement
// can tell a target (what tree-sitter calls a pattern) from any other expression.

// shape is what an expression is as a target.
type shape uint8

const (
	shOther  shape = iota
	shName         // an identifier
	shTarget       // an attribute or a subscript
	shTuple        // a parenthesized or bracketed list of targets
	shStar         // *target
)

func (s shape) pattern() bool { return s != shOther }

// startsExpr reports whether the current token can start an expression.
func (p *parser) startsExpr() bool {
	switch p.kind() {
	case tName, tNumber, tString, kTrue, kFalse, kNone, kNot, kLambda, kAwait,
		oLpar, oLsqb, oLbrace, oMinus, oPlus, oTilde, oEllipsis, oStar:
		return true
	}
	return false
}

// exprList reads expressions separated by commas (*target allowed, as tree-sitter's grammar
// allows it there): n of them, comma if there was one.
func (p *parser) exprList() (sh shape, n int, comma bool) {
	sh, n = p.starExpr(), 1
	all := sh.pattern()
	for p.kind() == oComma {
		p.next()
		comma = true
		if !p.startsExpr() {
			break
		}
		all = p.starExpr().pattern() && all
		n++
	}
	if comma {
		if all {
			return shTuple, n, comma
		}
		return shOther, n, comma
	}
	return sh, n, comma
}

// starExpr reads an expression or *target: tree-sitter's list_splat outside brackets takes only
// a name, an attribute or a subscript.
func (p *parser) starExpr() shape {
	if p.kind() != oStar {
		return p.expr()
	}
	p.next()
	if sh := p.primary(); sh != shName && sh != shTarget {
		p.fail("*expression")
	}
	return shStar
}

// element reads an element of a tuple, list or set display, or *expression.
func (p *parser) element() shape {
	if p.kind() != oStar {
		return p.expr()
	}
	p.next()
	if sh := p.expr(); sh == shName || sh == shTarget {
		return shStar
	}
	return shOther
}

func (p *parser) expr() shape {
	p.enter()
	defer func() { p.depth-- }()
	switch {
	case p.kind() == kLambda:
		p.next()
		p.parameters(oColon, false)
		p.expect(oColon)
		p.expr()
		return shOther
	case p.kind() == tName && p.peek(1) == oWalrus:
		p.next()
		p.next()
		p.expr()
		return shOther
	}
	sh := p.orTest()
	if p.kind() == kIf {
		p.next()
		p.orTest()
		p.expect(kElse)
		p.expr()
		return shOther
	}
	return sh
}

func (p *parser) orTest() shape {
	sh := p.andTest()
	for p.kind() == kOr {
		p.next()
		p.andTest()
		sh = shOther
	}
	return sh
}

func (p *parser) andTest() shape {
	sh := p.notTest()
	for p.kind() == kAnd {
		p.next()
		p.notTest()
		sh = shOther
	}
	return sh
}

func (p *parser) notTest() shape {
	if p.kind() != kNot {
		return p.comparison()
	}
	p.enter()
	p.next()
	p.notTest()
	p.depth--
	return shOther
}

func (p *parser) comparison() shape {
	sh := p.binary(1)
	for {
		switch p.kind() {
		case oLt, oGt, oEq, oNe, oLe, oGe, kIn:
			p.next()
		case kIs:
			p.next()
			if p.kind() == kNot {
				p.next()
			}
		case kNot:
			if p.peek(1) != kIn {
				return sh
			}
			p.next()
			p.next()
		default:
			return sh
		}
		p.binary(1)
		sh = shOther
	}
}

// binPrec is the precedence of a binary operator (0: none): | ^ & shifts + * in Python's order.
func binPrec(k tokKind) int {
	switch k {
	case oPipe:
		return 1
	case oCaret:
		return 2
	case oAmp:
		return 3
	case oShiftL, oShiftR:
		return 4
	case oPlus, oMinus:
		return 5
	case oStar, oSlash, oFloorDiv, oPercent, oAt:
		return 6
	}
	return 0
}

// binary reads operands joined by binary operators of precedence min or higher.
func (p *parser) binary(min int) shape {
	sh := p.unary()
	for {
		prec := binPrec(p.kind())
		if prec == 0 || prec < min {
			return sh
		}
		p.next()
		p.binary(prec + 1)
		sh = shOther
	}
}

func (p *parser) unary() shape {
	switch p.kind() {
	case oMinus, oPlus, oTilde:
		p.enter()
		p.next()
		p.unary()
		p.depth--
		return shOther
	}
	sh := shOther
	if p.kind() == kAwait {
		p.next()
		p.primary()
	} else {
		sh = p.primary()
	}
	if p.kind() == oPow {
		p.enter()
		p.next()
		p.unary()
		p.depth--
		return shOther
	}
	return sh
}
