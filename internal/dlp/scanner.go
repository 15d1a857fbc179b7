package dlp

import (
	"fmt"
	"net/textproto"
	"sort"
	"strings"
)

// Scanner scans requests and texts for the entities its Config enables. It is immutable after
// New and safe for concurrent use.
type Scanner struct {
	cfg Config
	on  map[string]bool // built-in detectors with an action other than allow

	rules     []regexRule // gitleaks rules, then custom detectors
	fullRules []int       // rules without keywords: run over the whole text
	ac        *acMatcher  // over the keywords of all rules
	kwRules   [][]int     // keyword id → rules that have it
	kwJWT     int32       // keyword id of "eyj", or -1
	kwPEM     int32       // keyword id of "-----begin ", or -1

	ignoreHeaders map[string]bool
	phoneLens     uint64 // see nationalLengths
}

// New compiles a scanner for cfg. Loading gitleaks' rules takes ~100 ms the first time in a
// process; build one Scanner per policy and share it.
func New(cfg Config) (*Scanner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Scanner{cfg: cfg, on: map[string]bool{}, ignoreHeaders: map[string]bool{}}
	for _, d := range builtinDetectors {
		s.on[d] = cfg.action(d, "").rank() > 0
	}
	secrets, err := secretRules(&cfg)
	if err != nil {
		return nil, err
	}
	custom, err := customRules(&cfg)
	if err != nil {
		return nil, err
	}
	s.rules = append(secrets, custom...)
	kwID := map[string]int{}
	var keywords []string
	for i, r := range s.rules {
		if len(r.keywords) == 0 {
			s.fullRules = append(s.fullRules, i)
			continue
		}
		for _, k := range r.keywords {
			id, ok := kwID[k]
			if !ok {
				id = len(keywords)
				kwID[k] = id
				keywords = append(keywords, k)
				s.kwRules = append(s.kwRules, nil)
			}
			s.kwRules[id] = append(s.kwRules[id], i)
		}
	}
	// JWTs and private key blocks are found through the same automaton: "eyJ" and "-----BEGIN "
	// are rare in text, and one pass over the text is cheaper than three.
	s.kwJWT, s.kwPEM = -1, -1
	if s.on[DetectorJWT] {
		s.kwJWT = int32(len(keywords))
		keywords = append(keywords, "eyj")
		s.kwRules = append(s.kwRules, nil)
	}
	if s.on[DetectorPrivateKey] {
		s.kwPEM = int32(len(keywords))
		keywords = append(keywords, "-----begin ")
		s.kwRules = append(s.kwRules, nil)
	}
	if len(keywords) > 0 {
		s.ac = newACMatcher(keywords)
	}
	if s.on[DetectorPhone] {
		s.phoneLens = nationalLengths(cfg.PhoneRegion)
		if s.phoneLens == 0 {
			return nil, fmt.Errorf("dlp: unknown phone region %q", cfg.PhoneRegion)
		}
	}
	for _, h := range cfg.IgnoreHeaders {
		s.ignoreHeaders[textproto.CanonicalMIMEHeaderKey(h)] = true
	}
	return s, nil
}

// Config returns the scanner's configuration with defaults filled in.
func (s *Scanner) Config() Config { return s.cfg }

// parallelMin is the text size from which scanText runs its two passes concurrently (if
// Config.Concurrency allows): below it a goroutine's start-up is a noticeable share of the scan.
const parallelMin = 1 << 20

// Limits on the work one text may cost, so that a body built to be slow (a megabyte of
// "api_key=<random>" lines, of valid-looking phone numbers) cannot hold the proxy for seconds.
// A text that reaches one is "cut": what was found counts, and the rest is treated like an
// oversize body (Config.Oversize). Ordinary traffic stays far below them: the 10 MB benchmark
// body uses ~5 KB of regex windows (of a budget of 380 KB) and ~20 phone parses (of 10,000).
// The slowest text found (1 MB of "api_key=<random>" lines) costs ~0.1 s per MB.
const (
	maxFindingsPerText = 1000
	// windowBudget is the bytes of regex windows a text may use: 64 KiB plus its length / 32.
	// Some gitleaks regexes run at ~0.5 MB/s in Go, so this bounds a text's regex time.
	windowBudgetBase, windowBudgetDiv = 64 << 10, 32
	// parseBudget is the phone candidates a text may have parsed: 500 plus one per KiB.
	parseBudgetBase, parseBudgetDiv = 500, 1 << 10
)

// budget tracks the work spent on one text.
type budget struct {
	windowBytes, parses int
	cut                 string // why the scan stopped early, or ""
}

func newBudget(n int) *budget {
	return &budget{windowBytes: windowBudgetBase + n/windowBudgetDiv, parses: parseBudgetBase + n/parseBudgetDiv}
}

func (b *budget) stop(why string) {
	if b.cut == "" {
		b.cut = why
	}
}

// scanText runs every enabled detector over text, and over what its encoded substrings decode to
// (decode.go), and returns the matches ordered by start, and why the scan stopped early if it
// did (see budget). rs holds the request's decoding budget.
func (s *Scanner) scanText(text []byte, rs *reqState) ([]match, string) {
	return s.scanLayer(text, rs, 0)
}

// scanLayer scans text, depth layers of decoding deep. It makes two passes: the keyword
// automaton (secret rules, custom detectors, JWT and private key candidates), and the digit,
// e-mail and token scan (cards, phones, SSNs, IBANs, e-mail addresses, cryptocurrency, seed
// phrases, decoding candidates); for large texts they run concurrently. Then the candidates are
// decoded and what they hold is scanned one layer deeper.
func (s *Scanner) scanLayer(text []byte, rs *reqState, depth int) ([]match, string) {
	var ms, other []match
	var jwts, pems []int
	var tokA, tokB tokenResult
	decode := !s.cfg.Decode.Off && depth < s.cfg.Decode.MaxDepth
	b1, b2 := newBudget(len(text)), newBudget(len(text)) // one per pass: they may run at once
	concurrent := len(text) >= parallelMin && s.cfg.Concurrency > 1
	// The token pass costs about as much as the keyword pass; when the passes run at once, each
	// goroutine takes a part of the text.
	mid := 0
	if concurrent {
		mid = tokenSplit(text)
	}
	pass2 := func() {
		if s.on[DetectorPaymentCard] || s.on[DetectorPhone] || s.on[DetectorUSSSN] || s.on[DetectorIBAN] {
			other = s.scanDigits(text, other, b2)
		}
		if s.on[DetectorEmail] {
			other = s.scanEmails(text, other)
		}
		tokB = s.scanTokens(text, mid, len(text), decode, other)
		other = tokB.out
	}
	if concurrent {
		done := make(chan struct{})
		go func() {
			defer close(done)
			pass2()
		}()
		ms, jwts, pems = s.scanKeywords(text, nil, b1)
		if mid > 0 {
			tokA = s.scanTokens(text, 0, mid, decode, nil)
		}
		<-done
		ms = append(ms, tokA.out...)
	} else {
		ms, jwts, pems = s.scanKeywords(text, nil, b1)
		pass2()
	}
	var cands []candidate
	if decode {
		cands = s.escapeCandidates(text, tokA, tokB)
	}
	ms = append(ms, other...)
	ms = s.scanJWTs(text, jwts, ms)
	ms = s.scanPrivateKeys(text, pems, ms)
	decodeCut := ""
	if len(cands) > 0 {
		ms, decodeCut = s.decodeAndScan(text, cands, rs, depth, ms)
	}
	out := ms[:0]
	for _, m := range ms {
		if m.action.rank() > 0 {
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].start != out[j].start {
			return out[i].start < out[j].start
		}
		if out[i].end != out[j].end {
			return out[i].end > out[j].end
		}
		return out[i].preferred(out[j])
	})
	// Two rules that found the same span (github-pat and generic-api-key on one token) make one
	// finding: the first after sorting, the one with the stronger action and the specific rule.
	dedup := out[:0]
	for _, m := range out {
		if n := len(dedup); n > 0 && dedup[n-1].start == m.start && dedup[n-1].end == m.end && dedup[n-1].detector == m.detector {
			continue
		}
		dedup = append(dedup, m)
	}
	cut := b1.cut
	if cut == "" {
		cut = b2.cut
	}
	if cut == "" {
		cut = decodeCut
	}
	if len(dedup) > maxFindingsPerText {
		dedup = dedup[:maxFindingsPerText]
		cut = fmt.Sprintf("it has more than %d findings", maxFindingsPerText)
	}
	return dedup, cut
}

// ScanBytes scans b as plain text and reports findings located at where (any label, e.g.
// "mcp:tool_call"). It does not decode b; use ScanContent for structured content.
//
// A text built to make the scan slow is cut short (see the limits above); the verdict's Unscanned
// then says so and, as for an oversize body, Config.Oversize decides: by default it blocks.
func (s *Scanner) ScanBytes(where string, b []byte) Verdict {
	ms, cut := s.scanText(b, s.newReqState())
	var v Verdict
	v.Findings = toFindings(b, ms, place{where: where, phrase: where}, 0)
	if cut != "" {
		s.applyCuts(&v, []string{where + " was not scanned whole: " + cut})
	}
	v.finish()
	return v
}

// applyCuts applies the oversize policy to scans cut short, once all findings are in.
func (s *Scanner) applyCuts(v *Verdict, cuts []string) {
	if len(cuts) == 0 {
		return
	}
	msg := strings.Join(cuts, "; ")
	if v.Unscanned != "" {
		v.Unscanned += "; "
	}
	v.Unscanned += msg
	if s.cfg.Oversize == OversizeBlock {
		if v.forced == "" {
			v.forced = "blocked: " + cuts[0]
		}
		return
	}
	v.Findings = unredactable(v.Findings) // a text not scanned whole cannot be redacted whole
}

// place is where a scanned text sits in the request.
type place struct {
	where, field string
	phrase       string // for the reason: "the JSON body field $.a"
}

// toFindings turns matches in text into findings; base is subtracted from offsets (the length of
// a "Name: " or "key=" prefix that was scanned for context).
func toFindings(text []byte, ms []match, pl place, base int) []Finding {
	out := make([]Finding, 0, len(ms))
	for i, m := range ms {
		desc := m.desc
		if m.enc != "" {
			desc += ", " + m.enc + ","
		}
		out = append(out, Finding{
			Detector: m.detector, Rule: m.rule, Action: m.action,
			Where: pl.where, Field: pl.field,
			Offset: max(0, m.start-base), Length: m.end - m.start,
			Encoding: m.enc,
			Excerpt:  excerpt(text, ms, i),
			desc:     desc, place: pl.phrase,
		})
	}
	return out
}
