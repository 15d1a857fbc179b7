package router

// What encloses an import, judged by the rules walker.context applies to the tree: a try whose
// handlers catch ImportError, an ImportError handler, `with suppress(ImportError)`, an if branch
// that runs on no target.

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

// context judges the frames that enclose something found.
func (p *parser) context(f found, targets []Target) (optional, dead bool) {
	for _, fr := range p.arena[f.frameAt : f.frameAt+f.nFram] {
		switch fr.kind {
		case frTry:
			optional = optional || p.catchesImportError(fr.con)
		case frExcept:
			optional = optional || p.handlesImportError(fr.part, false)
		case frWith:
			if c := &p.cons[fr.con]; !c.judged {
				c.judged, c.verdict = true, suppresses(string(p.src[c.start:c.bodyStart]))
			}
			optional = optional || p.cons[fr.con].verdict
		case frIf:
			dead = dead || p.deadBranch(fr.con, fr.part, targets)
		}
	}
	return optional, dead
}

// catchesImportError: the first handler that catches ImportError (or Exception) decides, by
// whether it gives up.
func (p *parser) catchesImportError(con int32) bool {
	if c := p.cons[con]; c.judged {
		return c.verdict
	}
	verdict := false
	for ci := p.cons[con].first; ci >= 0; ci = p.clauses[ci].next {
		if p.handlesImportError(ci, true) {
			cl := p.clauses[ci]
			verdict = !givesUp(p.src[cl.start:cl.end])
			break
		}
	}
	p.cons[con].judged, p.cons[con].verdict = true, verdict
	return verdict
}

// handlesImportError reads the types an except clause catches as tree-sitter-python shapes them:
// a tuple or a parenthesized expression gives its elements, anything else itself; a bare
// except's first comment stands where its types would (the walker takes it for them).
func (p *parser) handlesImportError(ci int32, broad bool) bool {
	if c := p.clauses[ci]; !broad && c.judged {
		return c.verdict
	}
	v := p.handles(p.clauses[ci], broad)
	if !broad {
		p.clauses[ci].judged, p.clauses[ci].verdict = true, v
	}
	return v
}

func (p *parser) handles(c clause, broad bool) bool {
	if c.from == c.to {
		if c.comment < 0 {
			return broad
		}
		cm := p.comments[c.comment]
		return catches(compact(p.src[cm.start:cm.end]), broad)
	}
	from, to := int(c.from), int(c.to)
	if p.toks[from].kind == oLpar && p.closing(from) == to-1 {
		for _, e := range p.split(from+1, to-1) {
			if catches(p.compactToks(e[0], e[1]), broad) {
				return true
			}
		}
		return false
	}
	return catches(p.compactToks(from, to), broad)
}

// closing returns the index of the token that closes the bracket at token i.
func (p *parser) closing(i int) int {
	depth := 0
	for j := i; j < len(p.toks); j++ {
		switch p.toks[j].kind {
		case oLpar, oLsqb, oLbrace:
			depth++
		case oRpar, oRsqb, oRbrace:
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// split returns the elements of tokens [from, to) separated by top-level commas (none for an
// empty range). A generator or yield there is not a tuple's elements: the parse stops.
func (p *parser) split(from, to int) [][2]int {
	var out [][2]int
	depth, start := 0, from
	for j := from; j < to; j++ {
		switch p.toks[j].kind {
		case oLpar, oLsqb, oLbrace:
			depth++
		case oRpar, oRsqb, oRbrace:
			depth--
		case kFor, kYield, kAsync:
			if depth == 0 {
				p.fail("a generator or yield in an except clause")
			}
		case oComma:
			if depth == 0 {
				out = append(out, [2]int{start, j})
				start = j + 1
			}
		}
	}
	if start < to {
		out = append(out, [2]int{start, to})
	}
	return out
}

// compactToks is walker.text of the node that spans tokens [from, to).
func (p *parser) compactToks(from, to int) string {
	return compact(p.src[p.toks[from].start:p.toks[to-1].end])
}

// deadBranch is walker.deadBranch: part 0 is the consequence, k > 0 the k-th elif, -1 the else.
// Conditions are read only when judged, as the walker reads them, and once.
func (p *parser) deadBranch(con, part int32, targets []Target) bool {
	if len(targets) == 0 {
		return false
	}
	switch c := p.cons[con]; {
	case part == 0:
		return p.judge(c.first, targets).no
	case part > 0:
		return p.judge(c.elifs[part-1], targets).no || p.earlierTrue(con, part, targets)
	default:
		return p.earlierTrue(con, int32(len(c.elifs)+1), targets)
	}
}

// earlierTrue reports whether one of the first n conditions of an if statement is true on every
// target.
func (p *parser) earlierTrue(con, n int32, targets []Target) bool {
	for c := &p.cons[con]; c.isTrue < 0 && c.checked < n; c = &p.cons[con] {
		ci := c.first
		if c.checked > 0 {
			ci = c.elifs[c.checked-1]
		}
		yes := p.judge(ci, targets).yes
		c = &p.cons[con]
		if yes {
			c.isTrue = c.checked
		}
		c.checked++
	}
	t := p.cons[con].isTrue
	return t >= 0 && t < n
}

// judge reads condition ci as tree-sitter's nodes (fastcond.go) and judges it, once.
func (p *parser) judge(ci int32, targets []Target) condition {
	if c := p.conds[ci]; c.read {
		return c
	}
	c := p.conds[ci]
	if p.extraIn(p.toks[c.from].start, p.toks[c.to-1].end) {
		p.fail("a comment in a condition") // a named child to tree-sitter
	}
	n := p.readCondition(int(c.from), int(c.to))
	c.read = true
	c.yes, c.no = everywhere(n, yes, targets), everywhere(n, no, targets)
	p.conds[ci] = c
	return c
}
