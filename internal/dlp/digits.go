package dlp

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Payment cards, phone numbers and SSNs are all digits in groups. One pass finds "clusters":
// digit runs joined by short separators (space, '-', '.', '(', ')', at most 3 in a row), with an
// optional leading '+' or '('. A cluster glued to a letter, digit or '_' on either side is part
// of an identifier (a UUID, a hex hash, a base64 blob) and is skipped. Each cluster is then
// offered to the enabled digit detectors. The same pass triggers the IBAN check where a digit run
// follows two capital letters.

// cluster is a candidate span of grouped digits in text.
type cluster struct {
	start, end int      // the span, including a leading '+' or '('
	plus       bool     // starts with '+'
	groups     [][2]int // the digit runs
	ndigits    int
}

// sep returns the separator between groups k and k+1.
func (c *cluster) sep(text []byte, k int) []byte { return text[c.groups[k][1]:c.groups[k+1][0]] }

const maxClusterGroups = 32

var byteClass [256]uint8

const (
	clsDigit = 1 << iota
	clsUpper
	clsLower
	clsWord // letters, digits and '_'
	clsSep  // cluster separators
)

func init() {
	for c := 0; c < 256; c++ {
		var k uint8
		switch {
		case '0' <= c && c <= '9':
			k = clsDigit | clsWord
		case 'A' <= c && c <= 'Z':
			k = clsUpper | clsWord
		case 'a' <= c && c <= 'z':
			k = clsLower | clsWord
		case c == '_':
			k = clsWord
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')':
			k = clsSep
		}
		byteClass[c] = k
	}
}

func isDigit(c byte) bool { return byteClass[c]&clsDigit != 0 }
func isWord(c byte) bool  { return byteClass[c]&clsWord != 0 }

// digitMask has the high bit of each byte of w set where that byte is an ASCII digit. XOR with
// '0' maps digits to 0-9; adding 0x76 to the low seven bits sets the high bit from 10 up, without
// carrying into the next byte; bytes with their own high bit set are not digits either.
func digitMask(w uint64) uint64 {
	t := w ^ 0x3030303030303030
	return ^(((t & 0x7f7f7f7f7f7f7f7f) + 0x7676767676767676) | t) & 0x8080808080808080
}

// nextDigit returns the index of the first ASCII digit in b at or after i, or len(b), testing
// eight bytes at a time: text between numbers is most of what a body holds.
func nextDigit(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := digitMask(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if isDigit(b[i]) {
			return i
		}
	}
	return i
}

// digitRunEnd returns the index of the first non-digit in b at or after i, or len(b).
func digitRunEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := ^digitMask(binary.LittleEndian.Uint64(b[i:])) & 0x8080808080808080; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if !isDigit(b[i]) {
			return i
		}
	}
	return i
}

// scanDigits runs the digit detectors over text.
func (s *Scanner) scanDigits(text []byte, out []match, b *budget) []match {
	wantIBAN := s.on[DetectorIBAN]
	wantCluster := s.on[DetectorPaymentCard] || s.on[DetectorPhone] || s.on[DetectorUSSSN]
	var c cluster
	groups := make([][2]int, 0, maxClusterGroups)
	n := len(text)
	for i := nextDigit(text, 0); i < n; i = nextDigit(text, i) {
		j := digitRunEnd(text, i+1)
		if wantIBAN && j-i >= 2 && i >= 2 && byteClass[text[i-1]]&clsUpper != 0 && byteClass[text[i-2]]&clsUpper != 0 &&
			(i == 2 || !isWord(text[i-3])) {
			if m, ok := s.iban(text, i-2); ok {
				out = append(out, m)
				i = m.end
				continue
			}
		}
		// Fast rejections: a run glued to a word character, or a short run that no separator
		// continues, makes no cluster worth checking.
		if !wantCluster || (i > 0 && isWord(text[i-1])) || (j < n && isWord(text[j])) ||
			(j-i < 7 && (j >= n || byteClass[text[j]]&clsSep == 0)) {
			i = j
			continue
		}
		c = cluster{start: i, groups: append(groups[:0], [2]int{i, j}), ndigits: j - i}
		if i > 0 && (text[i-1] == '+' || text[i-1] == '(') {
			c.start = i - 1
			c.plus = text[i-1] == '+'
		}
		k := j
		for len(c.groups) < maxClusterGroups {
			p := k
			for p < n && p-k < 3 && byteClass[text[p]]&clsSep != 0 {
				p++
			}
			if p == k || p >= n || !isDigit(text[p]) {
				break
			}
			q := p + 1
			for q < n && isDigit(text[q]) {
				q++
			}
			c.groups = append(c.groups, [2]int{p, q})
			c.ndigits += q - p
			k = q
		}
		c.end = k
		i = k
		if c.ndigits < 7 || (c.start > 0 && isWord(text[c.start-1])) || (c.end < n && isWord(text[c.end])) {
			continue
		}
		if s.on[DetectorPaymentCard] {
			out = s.cards(text, &c, out)
		}
		if s.on[DetectorUSSSN] {
			if m, ok := s.ssn(text, &c); ok {
				out = append(out, m)
			}
		}
		if s.on[DetectorPhone] && b.cut == "" {
			if m, ok := s.phone(text, &c, b); ok {
				out = append(out, m)
			}
		}
		if len(out) > maxFindingsPerText {
			b.stop(fmt.Sprintf("it has more than %d findings", maxFindingsPerText))
			return out
		}
	}
	return out
}

// hasContext reports whether one of the words occurs (ASCII case-insensitively) in the 32 bytes
// before pos. Forms of numbers too common to flag bare (9 digits for an SSN, a phone number
// without separators) are flagged only with such a word nearby.
func hasContext(text []byte, pos int, words []string) bool {
	var buf [32]byte
	w := buf[:0]
	for _, c := range text[max(0, pos-32):pos] {
		w = append(w, lower(c))
	}
	for _, word := range words {
		if indexString(w, word) >= 0 {
			return true
		}
	}
	return false
}

func indexString(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
