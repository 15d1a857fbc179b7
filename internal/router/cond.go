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
	conds := []*sitter.Node{ifs.ChildByFieldName("condition")}
	if cons := ifs.ChildByFieldName("consequence"); cons != nil && cons.Id() == child.Id() {
		return w.everywhere(conds[0], no)
	}
	earlierTrue := func() bool {
		for _, c := range conds {
			if w.everywhere(c, yes) {
				return true
			}
		}
		return false
	}
	for i := uint(0); i < ifs.NamedChildCount(); i++ {
		c := ifs.NamedChild(i)
		switch c.Kind() {
		case "elif_clause":
			cond := c.ChildByFieldName("condition")
			if c.Id() == child.Id() {
				return w.everywhere(cond, no) || earlierTrue()
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

// everywhere reports whether cond has value v on every target.
func (w *walker) everywhere(cond *sitter.Node, v tri) bool {
	if cond == nil {
		return false
	}
	for _, t := range w.targets {
		if w.eval(cond, t) != v {
			return false
		}
	}
	return true
}

func (w *walker) eval(n *sitter.Node, t Target) tri {
	switch n.Kind() {
	case "true":
		return yes
	case "false", "none":
		return no
	case "integer":
		if v, err := strconv.Atoi(w.text(n)); err == nil {
			if v == 0 {
				return no
			}
			return yes
		}
	case "identifier":
		if w.text(n) == "TYPE_CHECKING" {
			return no
		}
	case "attribute":
		if a := n.ChildByFieldName("attribute"); a != nil && w.text(a) == "TYPE_CHECKING" {
			return no
		}
	case "parenthesized_expression":
		if n.NamedChildCount() == 1 {
			return w.eval(n.NamedChild(0), t)
		}
	case "not_operator":
		if a := n.ChildByFieldName("argument"); a != nil {
			return w.eval(a, t).not()
		}
	case "boolean_operator":
		l, r := n.ChildByFieldName("left"), n.ChildByFieldName("right")
		op := n.ChildByFieldName("operator")
		if l == nil || r == nil || op == nil {
			return unknown
		}
		a, b := w.eval(l, t), w.eval(r, t)
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
		return w.compare(n, t)
	case "call":
		// sys.platform.startswith("win")
		f, args := n.ChildByFieldName("function"), n.ChildByFieldName("arguments")
		if f == nil || args == nil || args.NamedChildCount() != 1 || w.text(f) != "sys.platform.startswith" {
			return unknown
		}
		if s, ok := w.str(args.NamedChild(0)); ok {
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
func (w *walker) compare(n *sitter.Node, t Target) tri {
	if n.NamedChildCount() != 2 || n.ChildCount() != 3 {
		return unknown // chained comparisons
	}
	l, r := n.NamedChild(0), n.NamedChild(1)
	op := n.Child(1).Kind()
	left := w.text(l)
	if s, ok := w.str(r); ok {
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
		v, err := strconv.Atoi(w.text(r))
		if err != nil {
			return unknown
		}
		want = []int{v}
	} else {
		if r.Kind() != "tuple" {
			return unknown
		}
		for i := uint(0); i < r.NamedChildCount(); i++ {
			v, err := strconv.Atoi(w.text(r.NamedChild(i)))
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
func (w *walker) str(n *sitter.Node) (string, bool) {
	if n == nil || n.Kind() != "string" || n.NamedChildCount() > 3 {
		return "", false
	}
	s := string(w.src[n.StartByte():n.EndByte()])
	if len(s) < 2 || (s[0] != '"' && s[0] != '\'') || s[len(s)-1] != s[0] {
		return "", false
	}
	return s[1 : len(s)-1], true
}
