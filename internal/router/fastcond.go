package router

// The fast path's reading of an if condition as the nodes tree-sitter-python would make of it
// (kinds, named children, fields, source), so that cond.go judges it by the same rules. Only
// what those rules look at is built; brackets they never look into (lists, dicts, subscripts,
// generators) become one node of the right kind.

// cnode is a node of a condition.
type cnode struct {
	p          *parser
	kind       string
	start, end int32
	named      []*cnode
	// Fields, as tree-sitter-python names them.
	left, right, operator, argument, attribute, function, arguments *cnode
	// children is the comparison's child count (operands and operators); op its first operator.
	children uint
	op       string
}

func (n *cnode) Kind() string          { return n.kind }
func (n *cnode) NamedChildCount() uint { return uint(len(n.named)) }
func (n *cnode) ChildCount() uint      { return n.children }
func (n *cnode) Text() string          { return compact(n.p.src[n.start:n.end]) }
func (n *cnode) Source() string        { return string(n.p.src[n.start:n.end]) }

func (n *cnode) NamedChild(i uint) condNode {
	if int(i) >= len(n.named) {
		return nil
	}
	return n.named[i]
}

// Child serves compare, which asks for a comparison's operator (child 1) only.
func (n *cnode) Child(i uint) condNode {
	if i != 1 || n.op == "" {
		return nil
	}
	return &cnode{p: n.p, kind: n.op}
}

func (n *cnode) ChildByFieldName(name string) condNode {
	var c *cnode
	switch name {
	case "left":
		c = n.left
	case "right":
		c = n.right
	case "operator":
		c = n.operator
	case "argument":
		c = n.argument
	case "attribute":
		c = n.attribute
	case "function":
		c = n.function
	case "arguments":
		c = n.arguments
	}
	if c == nil {
		return nil // not a typed nil
	}
	return c
}

// readCondition reads tokens [from, to), which the parser has accepted as an expression.
func (p *parser) readCondition(from, to int) condNode {
	c := condReader{p: p, i: from, to: to}
	n := c.expr()
	if c.i != to {
		p.fail("a condition read two ways")
	}
	return n
}

type condReader struct {
	p     *parser
	i, to int
}

func (c *condReader) kind() tokKind {
	if c.i >= c.to {
		return tEOF
	}
	return c.p.toks[c.i].kind
}

// node makes a node of tokens [from, c.i).
func (c *condReader) node(kind string, from int) *cnode {
	return &cnode{p: c.p, kind: kind, start: c.p.toks[from].start, end: c.p.toks[c.i-1].end}
}

// skip moves past the bracketed tokens that start at the current one.
func (c *condReader) skip() {
	j := c.p.closing(c.i)
	if j < 0 || j >= c.to {
		c.p.fail("a condition's brackets")
	}
	c.i = j + 1
}

func (c *condReader) expr() *cnode {
	from := c.i
	switch {
	case c.kind() == kLambda:
		// The lambda's body runs to the end of the expression it is in.
		for depth := 0; c.i < c.to; c.i++ {
			switch c.kind() {
			case oLpar, oLsqb, oLbrace:
				depth++
			case oRpar, oRsqb, oRbrace:
				depth--
			case oComma, kFor, kAsync:
				if depth == 0 {
					return c.node("lambda", from)
				}
			}
			if depth < 0 {
				break
			}
		}
		return c.node("lambda", from)
	case c.kind() == tName && c.i+1 < c.to && c.p.toks[c.i+1].kind == oWalrus:
		c.i += 2
		c.expr()
		return c.node("named_expression", from)
	}
	n := c.or()
	if c.kind() == kIf {
		c.i++
		c.or()
		if c.kind() != kElse {
			c.p.fail("a conditional expression")
		}
		c.i++
		c.expr()
		return c.node("conditional_expression", from)
	}
	return n
}

func (c *condReader) or() *cnode  { return c.boolean(kOr, "or", c.and) }
func (c *condReader) and() *cnode { return c.boolean(kAnd, "and", c.not) }

func (c *condReader) boolean(k tokKind, op string, operand func() *cnode) *cnode {
	n := operand()
	for c.kind() == k {
		c.i++
		r := operand()
		n = &cnode{p: c.p, kind: "boolean_operator", start: n.start, end: r.end,
			left: n, right: r, operator: &cnode{p: c.p, kind: op}}
	}
	return n
}

func (c *condReader) not() *cnode {
	if c.kind() != kNot {
		return c.comparison()
	}
	from := c.i
	c.i++
	a := c.not()
	n := c.node("not_operator", from)
	n.argument = a
	return n
}

func (c *condReader) comparison() *cnode {
	first := c.binary()
	n := &cnode{p: c.p, kind: "comparison_operator", start: first.start, named: []*cnode{first}, children: 1}
	for {
		var op string
		switch k := c.kind(); k {
		case oLt, oGt, oEq, oNe, oLe, oGe, kIn:
			op = c.p.text(c.p.toks[c.i])
			c.i++
		case kIs:
			op = "is"
			c.i++
			if c.kind() == kNot {
				op = "is not"
				c.i++
			}
		case kNot:
			if c.i+1 >= c.to || c.p.toks[c.i+1].kind != kIn {
				return c.done(n, first)
			}
			op = "not in"
			c.i += 2
		default:
			return c.done(n, first)
		}
		if n.op == "" {
			n.op = op
		}
		r := c.binary()
		n.named, n.children, n.end = append(n.named, r), n.children+2, r.end
	}
}

func (c *condReader) done(n, first *cnode) *cnode {
	if len(n.named) == 1 {
		return first
	}
	return n
}

func (c *condReader) binary() *cnode {
	n := c.unary()
	for binPrec(c.kind()) > 0 {
		c.i++
		r := c.unary()
		n = &cnode{p: c.p, kind: "binary_operator", start: n.start, end: r.end}
	}
	return n
}

func (c *condReader) unary() *cnode {
	from := c.i
	var n *cnode
	switch c.kind() {
	case oMinus, oPlus, oTilde:
		c.i++
		c.unary()
		return c.node("unary_operator", from)
	case kAwait:
		c.i++
		c.primary()
		n = c.node("await", from)
	default:
		n = c.primary()
	}
	if c.kind() == oPow {
		c.i++
		c.unary()
		return c.node("binary_operator", from)
	}
	return n
}

func (c *condReader) primary() *cnode {
	from := c.i
	n := c.atom()
	for {
		switch c.kind() {
		case oDot:
			c.i += 2
			attr := c.node("identifier", c.i-1)
			obj := n
			n = c.node("attribute", from)
			n.left, n.attribute = obj, attr
		case oLpar:
			args := c.arguments()
			fn := n
			n = c.node("call", from)
			n.function, n.arguments = fn, args
		case oLsqb:
			c.skip()
			n = c.node("subscript", from)
		default:
			return n
		}
	}
}

func (c *condReader) arguments() *cnode {
	from := c.i
	c.i++
	args := &cnode{p: c.p, kind: "argument_list"}
	for c.kind() != oRpar {
		elem := c.i
		switch {
		case c.kind() == oStar || c.kind() == oPow:
			c.i++
			c.expr()
			args.named = append(args.named, c.node("splat", elem))
		case c.kind() == tName && c.i+1 < c.to && c.p.toks[c.i+1].kind == oAssign:
			c.i += 2
			c.expr()
			args.named = append(args.named, c.node("keyword_argument", elem))
		default:
			args.named = append(args.named, c.expr())
			if c.kind() == kFor || c.kind() == kAsync {
				c.i = from
				c.skip()
				gen := c.node("generator_expression", from)
				gen.named = make([]*cnode, 2) // its body and its for clause, as far as counting goes
				return gen
			}
		}
		if c.kind() != oComma {
			break
		}
		c.i++
	}
	if c.kind() != oRpar {
		c.p.fail("a condition's arguments")
	}
	c.i++
	n := c.node("argument_list", from)
	n.named = args.named
	return n
}

func (c *condReader) atom() *cnode {
	from := c.i
	switch c.kind() {
	case tName:
		c.i++
		return c.node("identifier", from)
	case tNumber:
		// Judged by strconv.Atoi, which reads no float, so integers and floats alike.
		c.i++
		return c.node("integer", from)
	case kTrue:
		c.i++
		return c.node("true", from)
	case kFalse:
		c.i++
		return c.node("false", from)
	case kNone:
		c.i++
		return c.node("none", from)
	case oEllipsis:
		c.i++
		return c.node("ellipsis", from)
	case tString:
		for c.kind() == tString {
			c.i++
		}
		if c.i-from > 1 {
			return c.node("concatenated_string", from)
		}
		return c.node("string", from)
	case oLsqb:
		c.skip()
		return c.node("list", from)
	case oLbrace:
		c.skip()
		return c.node("dictionary", from)
	case oLpar:
		return c.parens()
	}
	c.p.fail("a condition's atom")
	return nil
}

// parens reads (), (expression), a tuple or a generator.
func (c *condReader) parens() *cnode {
	from := c.i
	c.i++
	var elems []*cnode
	comma := false
	for c.kind() != oRpar {
		switch c.kind() {
		case kYield:
			c.i = from
			c.skip()
			return c.node("parenthesized_expression", from) // (yield): judged unknown
		case oStar:
			elem := c.i
			c.i++
			c.expr()
			elems = append(elems, c.node("list_splat", elem))
		default:
			elems = append(elems, c.expr())
		}
		if c.kind() == kFor || c.kind() == kAsync {
			c.i = from
			c.skip()
			return c.node("generator_expression", from)
		}
		if c.kind() != oComma {
			break
		}
		comma = true
		c.i++
	}
	if c.kind() != oRpar {
		c.p.fail("a condition's parentheses")
	}
	c.i++
	kind := "tuple"
	if len(elems) == 1 && !comma {
		kind = "parenthesized_expression"
	}
	n := c.node(kind, from)
	n.named = elems
	return n
}
