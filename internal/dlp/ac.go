package dlp

// acMatcher finds every occurrence of a set of keywords in a text, ASCII case-insensitively, in
// one pass. It is an Aho-Corasick automaton compiled to a dense DFA over byte classes (bytes that
// occur in no keyword share one class), so the inner loop is one table load per byte. A table
// entry with the high bit set means "the state reached has outputs".
//
// Keyword lists here are a few hundred entries (gitleaks' rules plus custom ones); the table is
// states × classes × 4 bytes, ~200 KB for the default rules (241 keywords, 42 classes).
type acMatcher struct {
	class    [256]uint8
	nclass   int
	trans    []int32   // [row+class] → next row | outFlag; a state's row is state*nclass
	outs     [][]int32 // state → keyword ids ending here (suffix outputs merged in)
	kwLen    []int     // keyword id → length
	keywords []string
}

const acOutFlag = int32(-1 << 31)

// newACMatcher builds the automaton. Keywords are lowercased ASCII; an empty list gives a matcher
// that never reports.
func newACMatcher(keywords []string) *acMatcher {
	m := &acMatcher{keywords: keywords, kwLen: make([]int, len(keywords))}
	// Byte classes: class 0 for bytes in no keyword; A-Z share the class of a-z.
	for _, k := range keywords {
		for i := 0; i < len(k); i++ {
			c := lower(k[i])
			if m.class[c] == 0 {
				m.nclass++
				m.class[c] = uint8(m.nclass)
			}
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		m.class[c] = m.class[c+'a'-'A']
	}
	m.nclass++
	nc := m.nclass

	// Trie.
	type node struct {
		next map[uint8]int32
		out  []int32
	}
	nodes := []node{{next: map[uint8]int32{}}}
	for id, k := range keywords {
		m.kwLen[id] = len(k)
		s := int32(0)
		for i := 0; i < len(k); i++ {
			c := m.class[lower(k[i])]
			n, ok := nodes[s].next[c]
			if !ok {
				n = int32(len(nodes))
				nodes = append(nodes, node{next: map[uint8]int32{}})
				nodes[s].next[c] = n
			}
			s = n
		}
		if len(k) > 0 {
			nodes[s].out = append(nodes[s].out, int32(id))
		}
	}

	// Breadth-first: failure links and the dense table.
	m.trans = make([]int32, len(nodes)*nc)
	m.outs = make([][]int32, len(nodes))
	fail := make([]int32, len(nodes))
	queue := make([]int32, 0, len(nodes))
	for c := 0; c < nc; c++ {
		if n, ok := nodes[0].next[uint8(c)]; ok {
			m.trans[c] = n
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		m.outs[s] = append(append([]int32(nil), nodes[s].out...), m.outs[fail[s]]...)
		for c := 0; c < nc; c++ {
			if n, ok := nodes[s].next[uint8(c)]; ok {
				fail[n] = m.trans[int(fail[s])*nc+c] &^ acOutFlag
				m.trans[int(s)*nc+c] = n
				queue = append(queue, n)
			} else {
				m.trans[int(s)*nc+c] = m.trans[int(fail[s])*nc+c] &^ acOutFlag
			}
		}
	}
	// Store rows rather than states so the scan loop does not multiply; outs is indexed by row.
	outs := make([][]int32, len(nodes)*nc)
	for st := range m.outs {
		outs[st*nc] = m.outs[st]
	}
	for i, t := range m.trans {
		m.trans[i] = t * int32(nc)
		if len(m.outs[t]) > 0 {
			m.trans[i] |= acOutFlag
		}
	}
	m.outs = outs
	return m
}

// acHit is a keyword occurrence: the keyword id and the index just past it.
type acHit struct {
	id  int32
	end int
}

// scan calls fn(keywordID, end) for every keyword occurrence, end being the index just past it,
// in order of end.
//
// Texts over 64 KB are scanned as two halves in one loop: each byte costs a table load that
// depends on the previous one, and two independent chains keep the CPU busy while one waits,
// which almost doubles the speed on one core. The second half starts maxLen-1 bytes early and
// reports only keywords ending past the middle, so every occurrence is reported once.
func (m *acMatcher) scan(b []byte, fn func(id int32, end int)) {
	if len(m.keywords) == 0 {
		return
	}
	if len(b) >= 64<<10 {
		m.scan2(b, fn)
		return
	}
	m.scan1(b, 0, fn)
}

func (m *acMatcher) scan2(b []byte, fn func(id int32, end int)) {
	maxLen := 0
	for _, l := range m.kwLen {
		maxLen = max(maxLen, l)
	}
	mid := len(b) / 2
	lo, hi := b[:mid], b[mid-maxLen+1:]
	off := mid - maxLen + 1
	trans, class := m.trans, &m.class
	var h1, h2 []acHit
	s1, s2 := int32(0), int32(0)
	n := len(lo)
	for i := 0; i < n; i++ {
		t1 := trans[s1+int32(class[lo[i]])]
		t2 := trans[s2+int32(class[hi[i]])]
		s1, s2 = t1&^acOutFlag, t2&^acOutFlag
		if t1 < 0 {
			for _, id := range m.outs[s1] {
				h1 = append(h1, acHit{id, i + 1})
			}
		}
		if t2 < 0 {
			for _, id := range m.outs[s2] {
				if e := off + i + 1; e > mid {
					h2 = append(h2, acHit{id, e})
				}
			}
		}
	}
	for i := n; i < len(hi); i++ { // the second half is up to maxLen longer
		t2 := trans[s2+int32(class[hi[i]])]
		s2 = t2 &^ acOutFlag
		if t2 < 0 {
			for _, id := range m.outs[s2] {
				h2 = append(h2, acHit{id, off + i + 1})
			}
		}
	}
	for _, h := range h1 {
		fn(h.id, h.end)
	}
	for _, h := range h2 {
		fn(h.id, h.end)
	}
}

// scan1 scans b, reporting ends offset by off.
func (m *acMatcher) scan1(b []byte, off int, fn func(id int32, end int)) {
	trans, class := m.trans, &m.class
	s := int32(0)
	for i, c := range b {
		t := trans[s+int32(class[c])]
		if t < 0 {
			s = t &^ acOutFlag
			for _, id := range m.outs[s] {
				fn(id, off+i+1)
			}
			continue
		}
		s = t
	}
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
