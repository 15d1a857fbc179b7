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

// The words that make a call an import: __import__ and import_module.
const (
	wNone = iota
	wDunder
	wModule
)

func (p *parser) word(t tok) int {
	switch t.end - t.start {
	case 10:
		if string(p.src[t.start:t.end]) == "__import__" {
			return wDunder
		}
	case 13:
		if string(p.src[t.start:t.end]) == "import_module" {
			return wModule
		}
	}
	return wNone
}

// primary reads an atom and its trailers (.name, (arguments), [subscript]). It is where calls of
// __import__ and import_module are found, as walker.calls finds them in the tree: the word
// called itself (`__import__(...)`), as the attribute called (`x.__import__(...)`, where for
// import_module x must be a name bound to importlib), or as the object of the attribute called
// (`__import__.f(...)`, which the walker counts too).
func (p *parser) primary() shape {
	atom := p.tok()
	atomWord := wNone
	if atom.kind == tName {
		atomWord = p.word(atom)
	}
	sh := p.atom()
	trailers, lastDot := 0, false
	dotWord, objName := wNone, false // the name after the last dot; whether its object is the atom's name
	for {
		switch p.kind() {
		case oDot:
			p.next()
			name := p.tok()
			p.expect(tName)
			dotWord, objName = p.word(name), trailers == 0 && sh == shName
			sh, lastDot = shTarget, true
		case oLpar:
			if atomWord == wNone && (!lastDot || dotWord == wNone) {
				p.arguments(true)
			} else {
				p.importCall(atom, atomWord, trailers, lastDot, dotWord, objName)
			}
			sh, lastDot = shOther, false
		case oLsqb:
			p.subscript()
			sh, lastDot = shTarget, false
		default:
			return sh
		}
		trailers++
	}
}

// importCall reads the arguments of a call that may be an import, and records each import the
// walker would count there (one per word: `__import__.__import__(x)` counts twice, as the
// walker visits each word).
func (p *parser) importCall(atom tok, atomWord, trailers int, lastDot bool, dotWord int, objName bool) {
	type pending struct {
		list *[]found
		i    int
	}
	var calls [2]pending
	n := 0
	add := func(word int, f found) {
		list := &p.dunders
		if word == wModule {
			list = &p.modules
		}
		f.imp.Line = int(atom.line) + 1
		calls[n] = pending{list, p.found(list, f)}
		n++
	}
	switch {
	case atomWord != wNone && trailers == 0: // __import__(...)
		add(atomWord, found{})
	case atomWord != wNone && trailers == 1 && lastDot: // __import__.f(...): the walker's callee is the attribute
		add(atomWord, found{viaObj: atomWord == wModule, obj: p.text(atom)})
	}
	if lastDot && dotWord == wDunder {
		add(wDunder, found{}) // x.__import__(...)
	}
	if lastDot && dotWord == wModule && objName {
		add(wModule, found{viaObj: true, obj: p.text(atom)}) // importlib.import_module(...)
	}
	lp := p.tok()
	a := p.arguments(true)
	if n > 0 && p.extraIn(lp.start, p.lastEnd) {
		p.fail("a comment in the arguments of an import call") // a named child to tree-sitter
	}
	for _, c := range calls[:n] {
		f := &(*c.list)[c.i]
		f.imp.Module, f.dynamic = p.callModule(a, c.list == &p.modules)
	}
}

// args is what the walker looks at in a call's arguments: how many (tree-sitter's named
// children), a generator for the only argument, and which of the first two are a lone string
// literal (token index, or -1).
type args struct {
	n             int
	generator     bool
	first, second int
}

// arguments reads a call's arguments, or a class's bases (no generator there).
func (p *parser) arguments(call bool) args {
	p.expect(oLpar)
	a := args{first: -1, second: -1}
	for p.kind() != oRpar {
		start := p.i
		switch {
		case p.kind() == oStar || p.kind() == oPow:
			p.next()
			p.expr()
		case p.kind() == tName && p.peek(1) == oAssign:
			p.next()
			p.next()
			p.expr()
		default:
			p.expr()
			if a.n == 0 && (p.kind() == kFor || p.kind() == kAsync) {
				if !call {
					p.fail("a generator as a base class")
				}
				p.comprehension()
				p.expect(oRpar)
				a.generator = true
				return a
			}
		}
		if p.i == start+1 && p.toks[start].kind == tString {
			switch a.n {
			case 0:
				a.first = start
			case 1:
				a.second = start
			}
		}
		a.n++
		if p.kind() != oComma {
			break
		}
		p.next()
	}
	p.expect(oRpar)
	return a
}

// callModule is what walker.calls makes of an import call's arguments: the module, or dynamic.
func (p *parser) callModule(a args, importModule bool) (string, bool) {
	if a.generator || a.n == 0 || a.first < 0 {
		return "", true
	}
	name, ok := literalName(p.text(p.toks[a.first]))
	if !ok {
		return "", true
	}
	if len(name) > 0 && name[0] == '.' && importModule && a.n > 1 && a.second >= 0 {
		if pkg, ok := literalName(p.text(p.toks[a.second])); ok {
			name = resolveRelative(name, pkg)
		}
	}
	if name == "" {
		return "", true
	}
	return name, false
}

func (p *parser) subscript() {
	p.expect(oLsqb)
	for {
		if p.kind() == kLambda || p.kind() == oStar {
			p.fail("lambda or * in a subscript")
		}
		if p.kind() != oColon {
			p.expr()
		}
		if p.kind() == oColon {
			p.next()
			if p.startsExpr() {
				p.expr()
			}
			if p.kind() == oColon {
				p.next()
				if p.startsExpr() {
					p.expr()
				}
			}
		}
		if p.kind() != oComma {
			break
		}
		p.next()
		if p.kind() == oRsqb {
			break
		}
	}
	p.expect(oRsqb)
}

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
