package dlp

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/zricethezav/gitleaks/v8/config"
)

// regexRule is a regex detector: a gitleaks secret rule or a custom detector from policy.
//
// A rule with keywords runs only in windows around keyword occurrences: the keyword must lie in
// the match, so a window reaching the rule's longest possible match on either side of the
// keyword holds every match (and rules whose length is unbounded get 512 bytes and a window that
// grows while a match touches its end). Windows of one rule that overlap are merged. This is what
// makes ~200 rules affordable: over a 10 MB body, running gitleaks' generic-api-key rule alone
// takes ~4 s, in windows it is microseconds per keyword hit.
type regexRule struct {
	detector, id, desc string
	re                 *regexp.Regexp
	// secretGroup is the capture group to redact: >0 a group, 0 the gitleaks default (the first
	// non-empty group, else the whole match), -1 the whole match.
	secretGroup int
	entropy     float64             // minimum Shannon entropy of the secret (gitleaks)
	allow       []*config.Allowlist // allowlists that drop a match: not a credential (secrets.go)
	global      []*config.Allowlist // gitleaks' global allowlist regexes: references, templates
	// examples and globalExamples are allowlists whose match marks a finding as an example key
	// (reported all the same); exampleValues are documented example values.
	examples, globalExamples []*config.Allowlist
	exampleValues            []string
	exampleSuffix            string            // " (an example key)"
	words                    *wordSet          // generic-api-key: drop values mostly made of these words
	check                    func([]byte) bool // a further condition on the secret, if any
	keywords                 []string
	before                   int // window bytes before the keyword
	after                    int // window bytes after the keyword
	// gate, if set, is a cheap necessary condition checked at each keyword hit before the
	// window is added, which may also bound the window's end; see secretGates.
	gate   func(text []byte, kwStart, kwEnd int) (ok bool, end int)
	action Action
}

const (
	unboundedWindow = 512
	maxWindow       = 4096
	maxGrownWindow  = 64 << 10
	// maxMergedWindow caps how far overlapping windows merge, so the regex never runs over a
	// long stretch at once (Go's regexp runs some rules at a few MB/s).
	maxMergedWindow = 16 << 10
)

// setWindow derives the window from the regex's longest match, in bytes.
func (r *regexRule) setWindow() {
	w := unboundedWindow
	if p, err := syntax.Parse(r.re.String(), syntax.Perl); err == nil {
		if n := maxMatchLen(p); n >= 0 && n <= maxWindow {
			w = n
		}
	}
	r.before, r.after = w, w
}

// maxMatchLen is the longest match of re in bytes, or -1 if unbounded.
func maxMatchLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return utf8.RuneLen(min(re.Rune[len(re.Rune)-1], utf8.MaxRune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxMatchLen(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return -1
	case syntax.OpRepeat:
		m := maxMatchLen(re.Sub[0])
		if re.Max < 0 || m < 0 {
			return -1
		}
		return m * re.Max
	case syntax.OpConcat, syntax.OpAlternate:
		total := 0
		for _, s := range re.Sub {
			m := maxMatchLen(s)
			if m < 0 {
				return -1
			}
			if re.Op == syntax.OpConcat {
				total += m
			} else {
				total = max(total, m)
			}
		}
		return total
	}
	return 0
}

// windowRun collects a scan's keyword windows per rule and runs each rule once per merged window.
type windowRun struct {
	s       *Scanner
	budget  *budget
	text    []byte
	jwts    []int    // starts of "eyJ"
	pems    []int    // starts of "-----BEGIN "
	pending []window // per rule
	touched []int
	out     []match
}

type window struct {
	start, end int
	lastEnd    int // end of the last match emitted, to drop duplicates across windows
	used       bool
}

// scanKeywords runs the keyword automaton over text: it runs the regex rules in their windows
// (and those without keywords over all of text) and returns the positions where JWTs and
// private key blocks may start.
func (s *Scanner) scanKeywords(text []byte, out []match, b *budget) (ms []match, jwts, pems []int) {
	w := &windowRun{s: s, text: text, out: out, budget: b}
	if s.ac != nil {
		s.ac.scan(text, w.hit)
		for _, r := range w.touched {
			w.flush(r)
		}
	}
	for _, r := range s.fullRules {
		w.budget.windowBytes += len(text) // rules without keywords must read it all
		w.run(r, 0, len(text), 0)
	}
	return w.out, w.jwts, w.pems
}

func (w *windowRun) hit(kw int32, end int) {
	start := end - w.s.ac.kwLen[kw]
	switch kw {
	case w.s.kwJWT:
		if string(w.text[start:end]) == "eyJ" {
			w.jwts = append(w.jwts, start)
		}
		return
	case w.s.kwPEM:
		if string(w.text[start:end]) == "-----BEGIN " {
			w.pems = append(w.pems, start)
		}
		return
	}
	for _, ri := range w.s.kwRules[kw] {
		r := &w.s.rules[ri]
		ws, we := max(0, start-r.before), min(len(w.text), end+r.after)
		if r.gate != nil {
			ok, gend := r.gate(w.text, start, end)
			if !ok {
				continue
			}
			if gend > 0 {
				we = min(len(w.text), gend)
			}
		}
		if w.pending == nil { // allocated on the first hit: most small texts have none
			w.pending = make([]window, len(w.s.rules))
		}
		p := &w.pending[ri]
		switch {
		case !p.used:
			*p = window{start: ws, end: we, used: true}
			w.touched = append(w.touched, ri)
		case ws <= p.end && max(p.end, we)-p.start <= maxMergedWindow:
			p.start, p.end = min(p.start, ws), max(p.end, we)
		default:
			w.flush(ri)
			p.start, p.end = ws, we
		}
	}
}

func (w *windowRun) flush(ri int) {
	p := &w.pending[ri]
	if p.start < p.end {
		p.lastEnd = w.run(ri, p.start, p.end, p.lastEnd)
	}
	p.start, p.end = 0, 0
}

// run matches rule ri in text[ws:we] and returns the end of the last match. Window edges are
// moved off the middle of a word so that \b and ^ do not see a false boundary; a window whose
// last match touches its end grows, because the match may go on.
func (w *windowRun) run(ri, ws, we, lastEnd int) int {
	r := &w.s.rules[ri]
	text := w.text
	if w.budget.cut != "" {
		return lastEnd
	}
	if len(w.out) > maxFindingsPerText {
		w.budget.stop(fmt.Sprintf("it has more than %d findings", maxFindingsPerText))
		return lastEnd
	}
	for k := 0; ws > 0 && k < 64 && isWord(text[ws-1]); k++ {
		ws--
	}
	for k := 0; we < len(text) && k < 64 && isWord(text[we]); k++ {
		we++
	}
	var ms [][]int
	for {
		if w.budget.windowBytes -= we - ws; w.budget.windowBytes < 0 {
			w.budget.stop("its keyword matches need more regex work than the DLP spends on one text")
			return lastEnd
		}
		ms = r.re.FindAllSubmatchIndex(text[ws:we], -1)
		if len(ms) == 0 || ws+ms[len(ms)-1][1] < we || we == len(text) || we-ws >= maxGrownWindow {
			break
		}
		we = min(len(text), we+max(256, we-ws))
	}
	for _, m := range ms {
		mStart, mEnd := ws+m[0], ws+m[1]
		if mStart < lastEnd {
			continue
		}
		ss, se := mStart, mEnd
		switch {
		case r.secretGroup > 0 && 2*r.secretGroup+1 < len(m) && m[2*r.secretGroup] >= 0:
			ss, se = ws+m[2*r.secretGroup], ws+m[2*r.secretGroup+1]
		case r.secretGroup == 0:
			for g := 1; 2*g+1 < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					ss, se = ws+m[2*g], ws+m[2*g+1]
					break
				}
			}
		}
		if se <= ss {
			continue
		}
		if r.entropy > 0 && shannonEntropy(text[ss:se]) <= r.entropy {
			continue
		}
		if r.check != nil && !r.check(text[ss:se]) {
			continue
		}
		if allowed(r.global, text, mStart, mEnd, ss, se) || allowed(r.allow, text, mStart, mEnd, ss, se) {
			continue
		}
		if r.words != nil && wordLike(r.words, text[mStart:ss], text[ss:se]) {
			continue
		}
		desc := r.desc
		if r.detector == DetectorSecret && (allowed(r.examples, text, mStart, mEnd, ss, se) ||
			allowed(r.globalExamples, text, mStart, mEnd, ss, se) || isExampleValue(text[ss:se], r.exampleValues)) {
			desc += r.exampleSuffix
		}
		lastEnd = mEnd
		w.out = append(w.out, match{detector: r.detector, rule: r.id, desc: desc, start: ss, end: se, action: r.action})
	}
	return lastEnd
}

const maxAllowLine = 1 << 10

// allowed applies gitleaks allowlists the way gitleaks' detector does for a fragment without a
// file path or commit: an allowlist with a path or commit condition under AND never applies.
func allowed(lists []*config.Allowlist, text []byte, ms, me, ss, se int) bool {
	secret := string(text[ss:se])
	for _, a := range lists {
		target := secret
		switch a.RegexTarget {
		case "match":
			target = string(text[ms:me])
		case "line":
			// The line, up to maxAllowLine bytes either side of the match: a JSON body is one
			// line, and running a regex over megabytes per match is what the windows avoid.
			ls, le := ms, me
			for ls > 0 && text[ls-1] != '\n' && ms-ls < maxAllowLine {
				ls--
			}
			for le < len(text) && text[le] != '\n' && le-me < maxAllowLine {
				le++
			}
			target = string(text[ls:le])
		}
		regexOK := a.RegexAllowed(target)
		stopOK, _ := a.ContainsStopWord(secret)
		if a.MatchCondition == config.AllowlistMatchAnd {
			if len(a.Commits) > 0 || len(a.Paths) > 0 {
				continue
			}
			ok := len(a.Regexes) > 0 || len(a.StopWords) > 0
			if len(a.Regexes) > 0 {
				ok = ok && regexOK
			}
			if len(a.StopWords) > 0 {
				ok = ok && stopOK
			}
			if ok {
				return true
			}
		} else if regexOK || stopOK {
			return true
		}
	}
	return false
}

// shannonEntropy is gitleaks' entropy: bits per character over the runes of s.
func shannonEntropy(b []byte) float64 {
	if len(b) == 0 {
		return 0
	}
	var ascii [128]int
	var other map[rune]int
	for _, r := range string(b) {
		if r < 128 {
			ascii[r]++
			continue
		}
		if other == nil {
			other = map[rune]int{}
		}
		other[r]++
	}
	// gitleaks divides by the byte length, not the rune count; keep its figures.
	inv := 1 / float64(len(b))
	e := 0.0
	add := func(c int) {
		if c > 0 {
			f := float64(c) * inv
			e -= f * math.Log2(f)
		}
	}
	for _, c := range ascii {
		add(c)
	}
	for _, c := range other {
		add(c)
	}
	return e
}

// wordLike reports whether the value of a generic assignment is words rather than a key: dictionary
// words cover half of it ("oauth2_client_credentials"), or, unless the name says password, it is
// shaped like an identifier of code ("x509.KeyUsageDigitalSignature", "NewEncapsulationKey1024").
// A random key has letter runs of one or two (case changes and digits cut it up); an
// identifier's words are longer.
func wordLike(ws *wordSet, name, value []byte) bool {
	if ws.coverage(value) >= wordCoverage {
		return true
	}
	l := bytes.ToLower(name)
	if bytes.Contains(l, []byte("passw")) || bytes.Contains(l, []byte("pwd")) {
		return false
	}
	return identifierLike(value)
}

// identifierLike: letters are most of v, and its letter runs, cut at non-letters and where a
// capital follows a small letter, average four letters or more.
func identifierLike(v []byte) bool {
	letters, runs := 0, 0
	for i, c := range v {
		up, lo := 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z'
		if !up && !lo {
			continue
		}
		letters++
		if i == 0 || byteClass[v[i-1]]&(clsUpper|clsLower) == 0 || (up && 'a' <= v[i-1] && v[i-1] <= 'z') {
			runs++
		}
	}
	return runs > 0 && letters*10 >= len(v)*6 && letters >= 4*runs
}

// wordCoverage is the share of a generic value that dictionary words may cover before the value
// counts as words rather than a key ("oauth2_client_credentials": 17 of 25 bytes).
const wordCoverage = 0.5

// wordSet is gitleaks' stopword list for generic-api-key, used as a coverage test.
type wordSet struct {
	words          map[string]bool
	minLen, maxLen int
}

func newWordSet(words []string) *wordSet {
	w := &wordSet{words: map[string]bool{}, minLen: 1 << 30}
	for _, s := range words {
		s = strings.ToLower(s)
		if len(s) < 3 {
			continue
		}
		w.words[s] = true
		w.minLen, w.maxLen = min(w.minLen, len(s)), max(w.maxLen, len(s))
	}
	return w
}

// coverage is the share of v's bytes inside an occurrence of one of the words.
func (w *wordSet) coverage(v []byte) float64 {
	if len(v) == 0 || len(w.words) == 0 {
		return 0
	}
	l := bytes.ToLower(v)
	covered, upTo := 0, 0 // bytes covered so far; l[:upTo] is accounted for
	for i := range l {
		best := 0
		for n := min(w.maxLen, len(l)-i); n >= w.minLen; n-- {
			if w.words[string(l[i:i+n])] {
				best = n
				break
			}
		}
		if best > 0 && i+best > upTo {
			covered += i + best - max(i, upTo)
			upTo = i + best
		}
	}
	return float64(covered) / float64(len(l))
}
