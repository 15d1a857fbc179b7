package router

import (
	"strconv"
	"strings"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// tri is a condition's value on one target: known true, known false, or unknown.
type tri int8

const (
	unknown tri = iota
	yes
	no
)

func (t tri) not() tri {
	switch t {
	case yes:
		return no
	case no:
		return yes
	}
	return unknown
}

// deadBranch reports whether child, a branch of the if statement ifs (its consequence block, an
// elif clause or the else clause), runs on no target: its own condition is false everywhere, or
// an earlier condition is true everywhere. Only conditions the router can judge count
// (TYPE_CHECKING, sys.version_info, sys.platform, os.name, literals); others may be either way.
func (w *walker) deadBranch(ifs, child *sitter.Node) bool {
	if len(w.targets) == 0 {
		return false
	}
	conds := []condNode{w.cond(ifs.ChildByFieldName("condition"))}
	if cons := ifs.ChildByFieldName("consequence"); cons != nil && cons.Id() == child.Id() {
		return everywhere(conds[0], no, w.targets)
	}
	earlierTrue := func() bool {
		for _, c := range conds {
			if everywhere(c, yes, w.targets) {
				return true
			}
		}
		return false
	}
	for i := uint(0); i < ifs.NamedChildCount(); i++ {
		c := ifs.NamedChild(i)
		switch c.Kind() {
		case "elif_clause":
			cond := w.cond(c.ChildByFieldName("condition"))
			if c.Id() == child.Id() {
				return everywhere(cond, no, w.targets) || earlierTrue()
			}
			conds = append(conds, cond)
		case "else_clause":
			if c.Id() == child.Id() {
				return earlierTrue()
			}
		}
	}
	return false
}

// condNode is what judging a condition needs of its expression's nodes: their kinds, children
// and fields as tree-sitter-python names them, and their source. The tree-sitter tree provides
// it (treeCond), and so does the fast path's reading of a condition (fastcond.go), so both judge
// conditions by the same rules.
type condNode interface {
	Kind() string
	NamedChildCount() uint
	NamedChild(i uint) condNode
	ChildCount() uint
	Child(i uint) condNode
	ChildByFieldName(name string) condNode
	// Text is the node's source without blanks and line continuations (walker.text).
	Text() string
	// Source is the node's source as written.
	Source() string
}

// treeCond is a tree-sitter node as a condNode.
type treeCond struct {
	w *walker
	n *sitter.Node
}

// cond wraps n, or returns nil.
func (w *walker) cond(n *sitter.Node) condNode {
	if n == nil {
		return nil
	}
	return treeCond{w, n}
}

func (c treeCond) Kind() string                       { return c.n.Kind() }
func (c treeCond) NamedChildCount() uint              { return c.n.NamedChildCount() }
func (c treeCond) NamedChild(i uint) condNode         { return c.w.cond(c.n.NamedChild(i)) }
func (c treeCond) ChildCount() uint                   { return c.n.ChildCount() }
func (c treeCond) Child(i uint) condNode              { return c.w.cond(c.n.Child(i)) }
func (c treeCond) ChildByFieldName(f string) condNode { return c.w.cond(c.n.ChildByFieldName(f)) }
func (c treeCond) Text() string                       { return c.w.text(c.n) }
func (c treeCond) Source() string                     { return string(c.w.src[c.n.StartByte():c.n.EndByte()]) }

// everywhere reports whether cond has value v on every target.
func everywhere(cond condNode, v tri, targets []Target) bool {
	if cond == nil {
		return false
	}
	for _, t := range targets {
		if eval(cond, t) != v {
			return false
		}
	}
	return true
}

func eval(n condNode, t Target) tri {
	switch n.Kind() {
	case "true":
		return yes
	case "false", "none":
		return no
	case "integer":
		if v, err := strconv.Atoi(n.Text()); err == nil {
			if v == 0 {
				return no
			}
			return yes
		}
	case "identifier":
		if n.Text() == "TYPE_CHECKING" {
			return no
		}
	case "attribute":
		if a := n.ChildByFieldName("attribute"); a != nil && a.Text() == "TYPE_CHECKING" {
			return no
		}
	case "parenthesized_expression":
		if n.NamedChildCount() == 1 {
			return eval(n.NamedChild(0), t)
		}
	case "not_operator":
		if a := n.ChildByFieldName("argument"); a != nil {
			return eval(a, t).not()
		}
	case "boolean_operator":
		l, r := n.ChildByFieldName("left"), n.ChildByFieldName("right")
		op := n.ChildByFieldName("operator")
		if l == nil || r == nil || op == nil {
			return unknown
		}
		a, b := eval(l, t), eval(r, t)
		switch op.Kind() {
		case "and":
			switch {
			case a == no || b == no:
				return no
			case a == yes && b == yes:
				return yes
			}
		case "or":
			switch {
			case a == yes || b == yes:
				return yes
			case a == no && b == no:
				return no
			}
		}
	case "comparison_operator":
		return compare(n, t)
	case "call":
		// sys.platform.startswith("win")
		f, args := n.ChildByFieldName("function"), n.ChildByFieldName("arguments")
		if f == nil || args == nil || args.NamedChildCount() != 1 || f.Text() != "sys.platform.startswith" {
			return unknown
		}
		if s, ok := str(args.NamedChild(0)); ok {
			return truth(strings.HasPrefix(t.Platform, s))
		}
	}
	return unknown
}

func truth(b bool) tri {
	if b {
		return yes
	}
	return no
}

// compare judges `sys.version_info OP (3, 11)`, `sys.version_info[:2] OP (3, 11)`,
// `sys.version_info.minor OP 11`, `sys.platform OP "linux"` and `os.name OP "nt"`.
func compare(n condNode, t Target) tri {
	if n.NamedChildCount() != 2 || n.ChildCount() != 3 {
		return unknown // chained comparisons
	}
	l, r := n.NamedChild(0), n.NamedChild(1)
	op := n.Child(1).Kind()
	left := l.Text()
	if s, ok := str(r); ok {
		var v string
		switch left {
		case "sys.platform":
			v = t.Platform
		case "os.name":
			v = "posix" // WASI CPython and Linux CPython alike
		default:
			return unknown
		}
		switch op {
		case "==":
			return truth(v == s)
		case "!=":
			return truth(v != s)
		}
		return unknown
	}
	version := []int{t.Version[0], t.Version[1], t.Version[2]}
	var have []int
	full, scalar := false, false // full: the whole version_info, 5 fields; scalar: one int
	switch left {
	case "sys.version_info":
		have, full = version, true
	case "sys.version_info[:1]":
		have = version[:1]
	case "sys.version_info[:2]", "sys.version_info[0:2]":
		have = version[:2]
	case "sys.version_info[:3]", "sys.version_info[0:3]":
		have = version[:3]
	case "sys.version_info[0]", "sys.version_info.major":
		have, scalar = version[:1], true
	case "sys.version_info[1]", "sys.version_info.minor":
		have, scalar = version[1:2], true
	default:
		return unknown
	}
	var want []int
	if scalar {
		v, err := strconv.Atoi(r.Text())
		if err != nil {
			return unknown
		}
		want = []int{v}
	} else {
		if r.Kind() != "tuple" {
			return unknown
		}
		for i := uint(0); i < r.NamedChildCount(); i++ {
			v, err := strconv.Atoi(r.NamedChild(i).Text())
			if err != nil {
				return unknown
			}
			want = append(want, v)
		}
		if full && len(want) > 3 {
			return unknown // compares the release level, a string
		}
	}
	c := 0
	for i := 0; i < len(have) && i < len(want) && c == 0; i++ {
		c = cmpInt(have[i], want[i])
	}
	if c == 0 {
		lh := len(have)
		if full {
			lh = 5
		}
		c = cmpInt(lh, len(want))
	}
	switch op {
	case "<":
		return truth(c < 0)
	case "<=":
		return truth(c <= 0)
	case ">":
		return truth(c > 0)
	case ">=":
		return truth(c >= 0)
	case "==":
		return truth(c == 0)
	case "!=":
		return truth(c != 0)
	}
	return unknown
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// str returns the value of a plain string literal.
func str(n condNode) (string, bool) {
	if n == nil || n.Kind() != "string" || n.NamedChildCount() > 3 {
		return "", false
	}
	s := n.Source()
	if len(s) < 2 || (s[0] != '"' && s[0] != '\'') || s[len(s)-1] != s[0] {
		return "", false
	}
	return s[1 : len(s)-1], true
}
