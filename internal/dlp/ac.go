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
// Texts over 64 KB are scanned as four segments in one loop: each byte costs a table load that
// depends on the previous one, and independent chains keep the CPU busy while one waits (two
// chains ran 1.5x as fast as one, four 2.2x). Each segment but the first starts maxLen-1 bytes
// early and reports only keywords ending inside it, so every occurrence is reported once.
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
	const k = 4 // chains
	maxLen := 0
	for _, l := range m.kwLen {
		maxLen = max(maxLen, l)
	}
	// Segment j covers [bound[j], bound[j+1]) and starts reading maxLen-1 bytes early; it
	// reports only keywords ending inside it.
	var bound [k + 1]int
	var from [k]int
	for j := 0; j <= k; j++ {
		bound[j] = len(b) * j / k
	}
	n := 0 // bytes every chain reads
	for j := 0; j < k; j++ {
		from[j] = max(0, bound[j]-maxLen+1)
		if j == 0 {
			n = bound[1] - from[0]
		}
		n = min(n, bound[j+1]-from[j])
	}
	trans, class := m.trans, &m.class
	var hits [k][]acHit
	var st [k]int32
	report := func(j int, t int32, end int) {
		for _, id := range m.outs[t&^acOutFlag] {
			if end > bound[j] || j == 0 {
				hits[j] = append(hits[j], acHit{id, end})
			}
		}
	}
	s0, s1, s2, s3 := from[0], from[1], from[2], from[3]
	for i := 0; i < n; i++ {
		t0 := trans[st[0]+int32(class[b[s0+i]])]
		t1 := trans[st[1]+int32(class[b[s1+i]])]
		t2 := trans[st[2]+int32(class[b[s2+i]])]
		t3 := trans[st[3]+int32(class[b[s3+i]])]
		st[0], st[1], st[2], st[3] = t0&^acOutFlag, t1&^acOutFlag, t2&^acOutFlag, t3&^acOutFlag
		if (t0 | t1 | t2 | t3) < 0 {
			if t0 < 0 {
				report(0, t0, s0+i+1)
			}
			if t1 < 0 {
				report(1, t1, s1+i+1)
			}
			if t2 < 0 {
				report(2, t2, s2+i+1)
			}
			if t3 < 0 {
				report(3, t3, s3+i+1)
			}
		}
	}
	for j := 0; j < k; j++ { // the chains' tails
		for p := from[j] + n; p < bound[j+1]; p++ {
			t := trans[st[j]+int32(class[b[p]])]
			st[j] = t &^ acOutFlag
			if t < 0 {
				report(j, t, p+1)
			}
		}
	}
	for j := 0; j < k; j++ {
		for _, h := range hits[j] {
			fn(h.id, h.end)
		}
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
