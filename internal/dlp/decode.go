package dlp

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"unicode/utf8"
)

// Decoding before matching. An agent that wants a key out encodes it: base64 (standard or
// URL-safe, padded or not, wrapped in lines), hex (plain, or with ':', ' ', '-' or "\x" between
// bytes), percent-encoding applied again and again, quoted-printable, gzip, and chains of these.
// So every scanned text also goes through a token pass that finds substrings shaped like an
// encoding, decodes them, and scans what comes out with every detector, to Config.Decode.MaxDepth
// layers, within a budget of Config.Decode.MaxBytes decoded bytes per request.
//
// Candidates (one pass over the text, a table lookup per byte):
//
//   - base64: a maximal run of [A-Za-z0-9+/_-] with both upper- and lower-case letters (the
//     base64 of any text has both; words and identifiers in one case are not decoded), at
//     least MinBase64 characters, with its '=' padding. A run that mixes '/' or '+' with '-' or
//     '_' is not one alphabet; it and a run with separators ("/v1/keys/<base64>",
//     "token-<base64>") are also tried piece by piece between '/', '-' and '_'. Lines of equal
//     length that are multiples of 4, one per line (MIME and PEM wrapping), are joined.
//   - hex: a run of hex digits only, of even length and at least MinHex digits ("0x" allowed
//     before it); pairs separated by one consistent ':', ' ' or '-'; runs of "\xHH".
//   - percent-encoding: a run of URL characters holding a %XX escape.
//   - quoted-printable: a run of printable text holding =XX escapes (upper-case hex) of which
//     one is a soft line break, "=3D", or followed by another escape ("=C3=A9"): "status=200
//     ip=10.0.0.1" is not decoded.
//
// A decoded candidate that starts like gzip or zlib data is inflated (within the budget). What
// comes out is scanned only if it is text: valid UTF-8 with at most 1 control character in 16.
// A UUID, a SHA-256, a base64 PNG or any id decodes to binary and costs a decode, nothing more.
// A decoded text with backslashes gets its JSON string escapes undone too, as a JSON body does.
//
// A finding in decoded data is placed at the encoded token: for base64, hex and gzip the whole
// token (redaction replaces it whole, since a part of a base64 token cannot be replaced), for
// percent-encoding and quoted-printable the escapes that spell the match. Its Encoding and its
// reason name the chain, outermost first: "an AWS access key, base64 → hex, in the query
// parameter q".
//
// Cost: the token pass runs over every scanned text (about 1 ns per byte); a candidate costs
// its decode (about 1 ns per byte) and, when it decodes to text, a scan of the decoded bytes.
// Over BenchBody (prose, UUIDs, timestamps, log lines) candidates are mostly UUIDs and paths,
// which decode to binary.

// Encoding names, as they appear in Finding.Encoding.
const (
	encBase64    = "base64"
	encBase64URL = "base64url"
	encHex       = "hex"
	encPercent   = "percent-encoding"
	encQP        = "quoted-printable"
	encGzip      = "gzip"
	encZlib      = "deflate"
)

// reqState is what one request's texts share: the decoding budget.
type reqState struct {
	decodeLeft int64 // decoded text (and inflated bytes) still allowed
	decodeCut  bool
	// wasted is what decoding that gave no text has cost. Past Decode.MaxBytes of it, the
	// pieces of tokens are no longer tried (the whole tokens still are): a body of ten
	// megabytes of paths with capitals ("/Users/Alice/Documents/...") must not be cut for it,
	// nor be decoded forty times over.
	wasted int64
}

func (s *Scanner) newReqState() *reqState { return &reqState{decodeLeft: s.cfg.Decode.MaxBytes} }

// charge takes n bytes from the budget, and reports false (marking the request) if there are
// not that many left.
func (rs *reqState) charge(n int) bool {
	if rs.decodeLeft < int64(n) {
		rs.decodeCut = true
		return false
	}
	rs.decodeLeft -= int64(n)
	return true
}

// Token byte classes.
const (
	tkLower = 1 << iota
	tkUpper
	tkDigit
	tkPlus
	tkSlash
	tkDash
	tkUnder
	tkNonHex // a letter that is not a hex digit
)

var tokClass = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = tkLower
		t[c-'a'+'A'] = tkUpper
		if c > 'f' {
			t[c] |= tkNonHex
			t[c-'a'+'A'] |= tkNonHex
		}
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = tkDigit
	}
	t['+'], t['/'], t['-'], t['_'] = tkPlus, tkSlash, tkDash, tkUnder
	return t
}()

const tkSeps = tkPlus | tkSlash | tkDash | tkUnder

type candKind uint8

const (
	candBase64  candKind = iota
	candWrapped          // base64 in lines: line breaks to drop
	candHex
	candHexDelim // pairs with one separator
	candHexEsc   // \xHH runs
	candPercent
	candQP
)

type candidate struct {
	start, end int
	kind       candKind
	group      int32 // candidates of one token (longest first), or 0
	url        bool  // base64 with '-' or '_': the URL-safe alphabet
	spec       bool  // a piece or run of pieces of a token, tried in case
}

// tokenScan is the state of the token pass over one text.
type tokenScan struct {
	s     *Scanner
	text  []byte
	out   []match
	cands []candidate

	decode, crypto, seed bool

	// pairs of hex digits separated by one consistent ':' or ' '
	dhStart, dhEnd, dhCount int
	dhSep                   byte

	// base64 lines (wrapping)
	wrapIdx  int // index in cands of the open wrapped candidate, or -1
	wrapLine int // its line length
	wrapNext int // where its next line must start

	group int32 // the last candidate group

	words [][2]int // seedStretch's buffer

	pct, qp, esc []int // positions of %XX, =XX (or soft breaks), \xHH
}

// scanTokens runs the token pass over text[lo:hi]: cryptocurrency and seed phrase checks, and
// the decoding candidates made of tokens (if decode); escapeCandidates adds those made of
// escapes.
//
// It works on 64-byte chunks, classified 8 bytes at a time (swarToken) into bit masks. A token
// is a maximal run of [A-Za-z0-9+/_-]; only three kinds need a look of their own, and the masks
// single them out without visiting the others (a chunk of prose holds ten tokens): tokens of 14
// bytes or more (base64, hex, addresses, keys), tokens of two hex digits (delimited hex), and
// the next line of a wrapped base64 block. Seed phrases are found from two more masks (lower-case
// letters, and the blanks, commas and quotes that may separate words): a stretch holding twelve
// words of three to eight letters with nothing else between them is split into words and
// checked; the rest of the text (85% of the words of BenchBody's prose) is not looked at word by
// word.
func (s *Scanner) scanTokens(text []byte, lo, hi int, decode bool, out []match) tokenResult {
	ts := tokenScan{s: s, text: text, out: out, decode: decode, wrapIdx: -1,
		crypto: s.on[DetectorCryptoAddress] || s.on[DetectorCryptoPrivateKey], seed: s.on[DetectorSeedPhrase]}
	if !ts.decode && !ts.crypto && !ts.seed {
		return tokenResult{out: out}
	}
	longOn := ts.decode || ts.crypto
	var prev, prevLow uint64 // the previous chunk's masks
	seedWords, seedFrom := 0, lo
	runStart := lo // where the token running into this chunk started
	for base := lo; base < hi; base += 64 {
		lim := min(64, hi-base)
		tok, low, gap := tokenMasks(text[base:base+lim], ts.seed)
		s1h, s1l := shl128(tok, prev, 1)
		ends := s1h &^ tok // bit j: a token ended at base+j
		starts := tok &^ s1h
		if lim < 64 {
			ends &= 1<<(lim+1) - 1
		}
		if ends != 0 && longOn {
			// Runs of 14 set bits: r14 bit i is set when bits i-13..i are.
			r2h, r2l := tok&s1h, prev&s1l
			t1, t2 := shl128(r2h, r2l, 2)
			r4h, r4l := r2h&t1, r2l&t2
			t1, t2 = shl128(r4h, r4l, 4)
			r8h, r8l := r4h&t1, r4l&t2
			t1, t2 = shl128(r8h, r8l, 6)
			r14h, r14l := r8h&t1, r8l&t2
			l14, _ := shl128(r14h, r14l, 1)
			for e := ends & l14; e != 0; e &= e - 1 {
				j := bits.TrailingZeros64(e)
				start := runStart
				if st := starts & (1<<j - 1); st != 0 {
					start = base + 63 - bits.LeadingZeros64(st)
				}
				ts.token(start, base+j, tokenClasses(text[start:base+j]))
			}
			if decode {
				s2h, _ := shl128(tok, prev, 2)
				s3h, _ := shl128(tok, prev, 3)
				for e := ends & s2h &^ s3h; e != 0; e &= e - 1 { // two-byte tokens
					end := base + bits.TrailingZeros64(e)
					if isHex(text[end-2]) && isHex(text[end-1]) {
						ts.pair(end - 2)
					}
				}
			}
		}
		if ts.seed {
			// Words start where a lower-case run does; any other byte (a capital, a digit, '.',
			// ':') ends the stretch. A stretch with 12 words is checked word by word.
			valid := ^uint64(0)
			if lim < 64 {
				valid = 1<<lim - 1
			}
			ws := low &^ (low<<1 | prevLow>>63) // starts of lower-case runs
			// Words of one or two letters, or of more than eight, end a stretch too. A word
			// that goes on into the next chunk counts as long enough and not too long.
			// (Bits past the chunk count as letters for "at least three" and as non-letters for
			// "nine or more", so that a word cut by the chunk's end never ends a stretch.)
			l1, l2 := low>>1|1<<63, low>>2|3<<62
			r := low & (low >> 1)
			r &= r >> 2
			r &= r >> 4
			nine := r & (low >> 8) // nine letters from there
			brk := valid&^(low|gap) | ws&^(l1&l2) | ws&nine
			ws &= l1 & l2 // only words of three letters or more are counted
			if brk == 0 {
				seedWords += bits.OnesCount64(ws)
			} else if seedWords+bits.OnesCount64(ws) < 12 {
				last := 63 - bits.LeadingZeros64(brk)
				seedWords = bits.OnesCount64(ws >> (last + 1) << (last + 1))
				seedFrom = base + last + 1
			} else {
				for b := brk; b != 0; b &= b - 1 {
					j := bits.TrailingZeros64(b)
					seedWords += bits.OnesCount64(ws & (1<<j - 1))
					ws &^= 1<<(j+1) - 1
					if seedWords >= 12 {
						ts.seedStretch(seedFrom, base+j)
					}
					seedWords, seedFrom = 0, base+j+1
				}
				seedWords = bits.OnesCount64(ws)
			}
		}
		if starts != 0 {
			runStart = base + 63 - bits.LeadingZeros64(starts)
		}
		prev, prevLow = tok, low
		if lim < 64 {
			prev = 0
		}
	}
	if hi > lo && prev>>63 != 0 && longOn { // a token runs to hi
		start := runStart
		if hi-start >= 14 {
			ts.token(start, hi, tokenClasses(text[start:hi]))
		} else if decode && hi-start == 2 && isHex(text[start]) && isHex(text[start+1]) {
			ts.pair(start)
		}
	}
	if ts.seed && seedWords >= 12 {
		ts.seedStretch(seedFrom, hi)
	}
	ts.flushPairs()
	if decode {
		ts.escapes(lo, hi)
	}
	return tokenResult{out: ts.out, cands: ts.cands, pct: ts.pct, qp: ts.qp, esc: ts.esc}
}

// tokenResult is what the token pass found in a part of a text: matches, candidates made of
// tokens, and the positions of escapes (which escapeCandidates turns into candidates once the
// parts are put together).
type tokenResult struct {
	out          []match
	cands        []candidate
	pct, qp, esc []int
}

// shl128 shifts the 128-bit value hi:lo left by k (1 ≤ k < 64).
func shl128(hi, lo uint64, k uint) (uint64, uint64) {
	return hi<<k | lo>>(64-k), lo << k
}

// seedStretch checks text[a:b], a stretch of lower-case letters and separators, for seed
// phrases: its runs of 12 or more words of 3 to 8 letters that may be wordlist words
// (bip39Maybe), separated as seedGap allows, go to seedPhrases.
func (ts *tokenScan) seedStretch(a, b int) {
	text := ts.text
	words := ts.words[:0]
	prevEnd := -1
	for i := a; i < b; {
		if byteClass[text[i]]&clsLower == 0 {
			i++
			continue
		}
		j := i + 1
		for j < b && byteClass[text[j]]&clsLower != 0 {
			j++
		}
		maybe := j-i >= 3 && j-i <= 8 && bip39Maybe(text[i:j])
		if !maybe || prevEnd >= 0 && !seedGap(text[prevEnd:i]) {
			if len(words) >= 12 {
				ts.out = ts.s.seedPhrases(text, words, ts.out)
			}
			words = words[:0]
		}
		if maybe {
			words = append(words, [2]int{i, j})
		}
		prevEnd = j
		i = j
	}
	if len(words) >= 12 {
		ts.out = ts.s.seedPhrases(text, words, ts.out)
	}
	ts.words = words[:0]
}

// escapes records the positions of %XX, =XX (and soft line breaks) and \xHH in text[lo:hi].
func (ts *tokenScan) escapes(lo, hi int) {
	text, n := ts.text, len(ts.text)
	next := func(i int, c byte) int {
		if i < lo {
			i = lo - 1
		}
		if k := bytes.IndexByte(text[i+1:hi], c); k >= 0 {
			return i + 1 + k
		}
		return -1
	}
	for i := next(lo-1, '%'); i >= 0; i = next(i, '%') {
		if i+2 < n && isHex(text[i+1]) && isHex(text[i+2]) {
			ts.pct = append(ts.pct, i)
		}
	}
	for i := next(lo-1, '='); i >= 0; i = next(i, '=') {
		if i+2 < n && isUpperHex(text[i+1]) && isUpperHex(text[i+2]) || i+1 < n && text[i+1] == '\n' ||
			i+2 < n && text[i+1] == '\r' && text[i+2] == '\n' {
			ts.qp = append(ts.qp, i)
		}
	}
	for i := next(lo-1, '\\'); i >= 0; i = next(i, '\\') {
		if i+3 < n && text[i+1] == 'x' && isHex(text[i+2]) && isHex(text[i+3]) {
			ts.esc = append(ts.esc, i)
		}
	}
}

// tokenMasks classifies up to 64 bytes: bit j of tok is set if b[j] is in [A-Za-z0-9+/_-], and
// (if seed) of low if it is in [a-z] and of gap if it may separate the words of a seed phrase
// (see swarSeed). swarToken and swarSeed are written out in the loop: as calls they cost a
// third of the pass.
func tokenMasks(b []byte, seed bool) (tok, low, gap uint64) {
	const (
		h, l       = swarH, swarL
		gatherBits = 0x0102040810204080
	)
	j := 0
	for ; j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		x7 := x &^ h
		y := x7 | l*0x20
		letters := (y + l*(0x80-'a')) &^ (y + l*(0x7f-'z'))
		sym := (x7 + l*(0x80-'+')) &^ (x7 + l*(0x7f-'9')) &^
			((x7 + l*(0x80-',')) &^ (x7 + l*(0x7f-'.')) &^ (x7 << 7))
		t := (letters | (y + l) | sym) & h &^ x
		tok |= (t >> 7) * gatherBits >> 56 << j
		if seed {
			lw := (x7 + l*(0x80-'a')) &^ (x7 + l*(0x7f-'z')) & h &^ x
			g := ^(x7 + l*(0x80-'-')) & h &^ x // the bytes below '-'
			low |= (lw >> 7) * gatherBits >> 56 << j
			gap |= (g >> 7) * gatherBits >> 56 << j
		}
	}
	for ; j < len(b); j++ {
		c := b[j]
		if tokClass[c] != 0 || c == 0x7f { // as swarToken
			tok |= 1 << j
		}
		if 'a' <= c && c <= 'z' {
			low |= 1 << j
		}
		if c < '-' {
			gap |= 1 << j
		}
	}
	return tok, low, gap
}

// escapeCandidates puts the parts of a text's token pass together (in order) and adds the
// percent-encoded, quoted-printable and \xHH candidates their escapes make.
func (s *Scanner) escapeCandidates(text []byte, parts ...tokenResult) []candidate {
	ts := tokenScan{s: s, text: text}
	for _, p := range parts {
		ts.cands = append(ts.cands, p.cands...)
		ts.pct, ts.qp, ts.esc = append(ts.pct, p.pct...), append(ts.qp, p.qp...), append(ts.esc, p.esc...)
	}
	ts.regions()
	return ts.cands
}

// tokenSplit returns where to split text in two for the token pass: a byte near 45% of it (the
// goroutine that also runs the keyword automaton takes the smaller part) that no token, run of
// words, hex pairs or wrapped lines goes through; 0 if there is none near.
func tokenSplit(text []byte) int {
	for i := len(text) * 9 / 20; i < len(text) && i < len(text)*9/20+64<<10; i++ {
		switch text[i] {
		case '{', '}', '[', ']', '.', ';', '<', '>', '(', ')', '!', '?', '#', '&', '*', '|', '~', '$', '@':
			return i
		}
	}
	return 0
}

const (
	swarH = 0x8080808080808080
	swarL = 0x0101010101010101
)

// swarIn sets the high bit of each byte of x7 (high bits clear) that is in [lo, hi]: adding
// 0x80-lo carries into the high bit from lo up, adding 0x7f-hi from hi+1 up; no byte carries
// into the next.
func swarIn(x7 uint64, lo, hi byte) uint64 {
	return (x7 + swarL*uint64(0x80-lo)) &^ (x7 + swarL*uint64(0x7f-hi)) & swarH
}

// swarToken returns one bit per byte of x (little-endian): whether it is in [A-Za-z0-9+/_-] (or
// is DEL, which shares '_”s value once case is folded: a harmless exception).
func swarToken(x uint64) uint64 {
	x7 := x &^ swarH
	y := x7 | swarL*0x20 // letters folded to lower case; '_' and DEL become 0x7f
	letters := swarIn(y, 'a', 'z')
	under := (y + swarL) & swarH // only 0x7f carries into the high bit
	// '+', '-', '/' and the digits: 0x2b-0x39 but for the even bytes of 0x2c-0x2e (',' '.').
	sym := swarIn(x7, '+', '9') &^ (swarIn(x7, ',', '.') &^ (x7 << 7))
	return gatherHigh((letters | under | sym) &^ x)
}

// swarSeed returns one bit per byte of x: whether it is in [a-z], and whether it may separate
// the words of a seed phrase. The separators are over-approximated (every byte below '-':
// controls, blanks, '"', '\”, ','), since seedStretch checks each gap exactly.
func swarSeed(x uint64) (low, gap uint64) {
	x7 := x &^ swarH
	return gatherHigh(swarIn(x7, 'a', 'z') &^ x), gatherHigh(^(x7 + swarL*(0x80-'-')) & swarH &^ x)
}

// gatherHigh packs the high bit of each byte of v (only high bits set) into 8 bits, byte 0 in
// bit 0.
func gatherHigh(v uint64) uint64 {
	return (v >> 7) * 0x0102040810204080 >> 56
}

func isUpperHex(c byte) bool { return isDigit(c) || ('A' <= c && c <= 'F') }

// token handles a token of 14 bytes or more, text[start:end], whose classes are m.
func (ts *tokenScan) token(start, end int, m uint8) {
	text := ts.text
	l := end - start
	if ts.decode && ts.wrapIdx >= 0 && ts.wrapped(start, end, m) {
		ts.peekWrap()
		return
	}
	if l < 16 && !ts.crypto {
		return
	}
	if ts.crypto {
		if m&tkSeps == 0 {
			ts.cryptoRun(start, end)
		} else if l <= maxSplitToken {
			for a := start; a < end; {
				b := a
				for b < end && tokClass[text[b]]&tkSeps == 0 {
					b++
				}
				if b-a >= 14 {
					ts.cryptoRun(a, b)
				}
				a = b + 1
			}
		}
	}
	if !ts.decode || l < 16 {
		return
	}
	// The candidates of one token form a group, longest first: once one decodes to text, the
	// shorter ones inside it are not tried (decodeAndScan).
	first := len(ts.cands)
	ts.classify(start, end, m, true)
	whole := len(ts.cands)
	if m&tkSeps != 0 && l <= maxSplitToken {
		// A path or a prefixed value: each piece between '/' is a token of its own, and so is
		// each run of pieces (base64 holds '/' too: "/v1/keys/aWQ9.../Pz4+/view"). Runs are
		// base64 only, which needs both cases.
		mixed := m&tkUpper != 0 && m&tkLower != 0
		minB64, minPiece := ts.s.cfg.Decode.MinBase64, min(ts.s.cfg.Decode.MinBase64, ts.s.cfg.Decode.MinHex)
		var cutBuf [maxPieces + 2]int
		var clsBuf [maxPieces + 1]uint8
		cuts, cls := append(cutBuf[:0], start), clsBuf[:0] // starts of the pieces, then end+1
		var pc uint8
		for i := start; i < end && len(cuts) <= maxPieces; i++ {
			if c := text[i]; c == '/' {
				cuts, cls, pc = append(cuts, i+1), append(cls, pc), 0
			} else {
				pc |= tokClass[c]
			}
		}
		cuts, cls = append(cuts, end+1), append(cls, pc)
		if n := len(cuts) - 1; n > 1 && n <= maxPieces { // more pieces: the loop stopped early
			for i := 0; i < n; i++ {
				run := uint8(0)
				for j := i; j < n; j++ {
					run |= cls[j]
					a, b := cuts[i], cuts[j+1]-1
					switch {
					case b-a < minPiece || (a == start && b == end):
					case i == j:
						ts.classify(a, b, cls[i], true)
					case mixed && b-a >= minB64 && run&(tkDash|tkUnder) == 0:
						ts.base64(a, b, run|tkSlash)
					}
				}
			}
		} else if n == 1 && mixed {
			// No '/': pieces between '-' and '_' ("token-aWQ9...").
			for a := start; a < end; {
				b := a
				for b < end && tokClass[text[b]]&(tkDash|tkUnder) == 0 {
					b++
				}
				if b-a >= minB64 && (a != start || b != end) {
					ts.base64(a, b, classesOf(text[a:b]))
				}
				a = b + 1
			}
		}
	}
	for i := whole; i < len(ts.cands); i++ {
		ts.cands[i].spec = true
	}
	if g := ts.cands[first:]; len(g) > 1 {
		ts.group++
		sort.SliceStable(g, func(i, j int) bool { return g[i].end-g[i].start > g[j].end-g[j].start })
		for i := range g {
			g[i].group = ts.group
		}
	}
}

// classify adds the decoding candidates text[a:b] (a token or a piece of one) makes: hex,
// delimited hex, or base64.
func (ts *tokenScan) classify(a, b int, m uint8, whole bool) {
	text := ts.text
	l := b - a
	minHex := ts.s.cfg.Decode.MinHex
	switch {
	case m&^(tkLower|tkUpper|tkDigit) == 0 && m&tkNonHex == 0: // hex digits only: never base64
		if l >= minHex && l%2 == 0 {
			ts.cands = append(ts.cands, candidate{start: a, end: b, kind: candHex})
		}
	case l > 2 && text[a] == '0' && text[a+1] == 'x' && hexOnly(text[a+2:b]):
		if l-2 >= minHex && l%2 == 0 {
			ts.cands = append(ts.cands, candidate{start: a, end: b, kind: candHex})
		}
	case m&tkDash != 0 && m&^(tkLower|tkUpper|tkDigit|tkDash) == 0 && m&tkNonHex == 0 && pairsWith(text[a:b], '-'):
		if (l+1)/3 >= minHex/2 {
			ts.cands = append(ts.cands, candidate{start: a, end: b, kind: candHexDelim})
		}
	default:
		if ts.base64(a, b, m) && whole && m&(tkDash|tkUnder) == 0 && wrapWidth(l) && paddingAt(text, b) == 0 {
			if next := lineAfter(text, b); next > b {
				ts.wrapIdx, ts.wrapLine, ts.wrapNext = len(ts.cands)-1, l, next
				ts.peekWrap()
			}
		}
	}
}

// base64 adds text[a:b] (and its padding) as a base64 candidate if it may be one: long enough,
// both cases, one alphabet.
func (ts *tokenScan) base64(a, b int, m uint8) bool {
	if b-a < ts.s.cfg.Decode.MinBase64 || m&tkUpper == 0 || m&tkLower == 0 ||
		m&(tkPlus|tkSlash) != 0 && m&(tkDash|tkUnder) != 0 {
		return false
	}
	ts.cands = append(ts.cands, candidate{start: a, end: b + paddingAt(ts.text, b), kind: candBase64,
		url: m&(tkDash|tkUnder) != 0})
	return true
}

// wrapWidth reports whether a line of base64 of this length is a wrapped block's: PEM wraps at
// 64, MIME at 76, others at 60 or 72.
func wrapWidth(l int) bool { return l == 64 || l == 76 || l == 60 || l == 72 }

// maxPieces is the most '/'-separated pieces whose runs are tried as base64 (n(n+1)/2 runs).
const maxPieces = 12

// maxSplitToken is the longest token whose pieces between separators are tried on their own
// (for base64 after a path or a prefix, for addresses in a path): paths and prefixed values are
// short, and a base64 image holds a '/' every 32 characters.
const maxSplitToken = 512

// wrapped continues the open wrapped base64 block with the token text[start:end] if it is its
// next line, and reports whether it did.
func (ts *tokenScan) wrapped(start, end int, m uint8) bool {
	text, l := ts.text, end-start
	pad := paddingAt(text, end)
	if start == ts.wrapNext && m&^(tkLower|tkUpper|tkDigit|tkPlus|tkSlash|tkNonHex) == 0 &&
		(l == ts.wrapLine || l < ts.wrapLine && (l+pad)%4 == 0) {
		ts.cands[ts.wrapIdx].end = end + pad
		ts.cands[ts.wrapIdx].kind = candWrapped
		if l == ts.wrapLine && pad == 0 {
			ts.wrapNext = lineAfter(text, end)
		} else {
			ts.wrapIdx = -1 // a short (last) line closes the block
		}
		return true
	}
	ts.wrapIdx = -1
	return false
}

// peekWrap takes the next line of an open wrapped block now if it is shorter than 14 bytes
// (the last line): the chunk loop visits only longer tokens.
func (ts *tokenScan) peekWrap() {
	if ts.wrapIdx < 0 {
		return
	}
	text, a := ts.text, ts.wrapNext
	b := a
	for b < len(text) && tokClass[text[b]] != 0 {
		b++
	}
	if b > a && b-a < 14 {
		ts.wrapped(a, b, classesOf(text[a:b]))
	}
}

// tokenClasses is classesOf for a token, sampled past 8 KiB (its first 6 and last 2 KiB): a
// token that long is a base64 or hex blob whose alphabet its ends show, and a wrong guess costs
// a failed decode.
func tokenClasses(b []byte) uint8 {
	if len(b) <= 8<<10 {
		return classesOf(b)
	}
	return classesOf(b[:6<<10]) | classesOf(b[len(b)-2<<10:])
}

func classesOf(b []byte) (m uint8) {
	for _, c := range b {
		m |= tokClass[c]
	}
	return m
}

func hexOnly(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return len(b) > 0
}

// pairsWith reports whether b is hex pairs separated by sep: "41-4b-49".
func pairsWith(b []byte, sep byte) bool {
	if len(b)%3 != 2 {
		return false
	}
	for i, c := range b {
		if i%3 == 2 {
			if c != sep {
				return false
			}
		} else if !isHex(c) {
			return false
		}
	}
	return true
}

// paddingAt counts the '=' (at most two) at text[i:].
func paddingAt(text []byte, i int) int {
	n := 0
	for i+n < len(text) && n < 2 && text[i+n] == '=' {
		n++
	}
	return n
}

// lineAfter returns where the next line starts if text[i:] is a line break ("\n" or "\r\n"),
// or i.
func lineAfter(text []byte, i int) int {
	switch {
	case i < len(text) && text[i] == '\n':
		return i + 1
	case i+1 < len(text) && text[i] == '\r' && text[i+1] == '\n':
		return i + 2
	}
	return i
}

func (ts *tokenScan) cryptoRun(a, b int) {
	if m, ok := ts.s.checkCryptoRun(ts.text, a, b); ok {
		ts.out = append(ts.out, m)
	}
}

// pair handles a token of two hex digits: it extends or starts a run of delimited pairs.
func (ts *tokenScan) pair(start int) {
	text := ts.text
	if ts.dhCount > 0 && start == ts.dhEnd+1 && text[ts.dhEnd] == ts.dhSep {
		ts.dhCount++
		ts.dhEnd = start + 2
		return
	}
	ts.flushPairs()
	if start+2 < len(text) && (text[start+2] == ':' || text[start+2] == ' ') {
		ts.dhStart, ts.dhEnd, ts.dhCount, ts.dhSep = start, start+2, 1, text[start+2]
	}
}

func (ts *tokenScan) flushPairs() {
	if ts.dhCount > 0 && ts.dhCount >= ts.s.cfg.Decode.MinHex/2 {
		ts.cands = append(ts.cands, candidate{start: ts.dhStart, end: ts.dhEnd, kind: candHexDelim})
	}
	ts.dhCount = 0
}

// isURLChar: the characters a percent-encoded run is made of (printable ASCII but for quotes,
// blanks and the characters that delimit URLs in text).
func isURLChar(c byte) bool {
	return c > ' ' && c < 0x7f && c != '"' && c != '\'' && c != '<' && c != '>' && c != '`' && c != '\\' &&
		c != '{' && c != '}' && c != '|' && c != '^'
}

// regions turns the escapes the pass saw into percent, quoted-printable and \x candidates.
func (ts *tokenScan) regions() {
	text := ts.text
	end := -1
	for _, p := range ts.pct {
		if p < end {
			continue
		}
		a, b := p, p+3
		for a > 0 && isURLChar(text[a-1]) {
			a--
		}
		for b < len(text) && isURLChar(text[b]) {
			b++
		}
		ts.cands = append(ts.cands, candidate{start: a, end: b, kind: candPercent})
		end = b
	}
	// "key=10 status=200" holds =XX too: a region is decoded only around a soft line break, "=3D"
	// (an encoded '=') or an escape followed by another ("=C3=A9", "=41=4B").
	end = -1
	for i, q := range ts.qp {
		if q < end {
			continue
		}
		soft := q+2 >= len(text) || text[q+1] == '\n' || text[q+1] == '\r'
		strong := !soft && (text[q+1] == '3' && text[q+2] == 'D' ||
			q+5 < len(text) && text[q+3] == '=' && isUpperHex(text[q+4]) && isUpperHex(text[q+5]))
		if soft && (i+1 >= len(ts.qp) || ts.qp[i+1]-q > 80) {
			continue // a lone "=\n" ends base64 lines too; soft breaks come every line
		}
		if !strong && !soft {
			continue
		}
		a, b := q, q+1
		for a > 0 && isQPChar(text[a-1]) {
			a--
		}
		for b < len(text) {
			if isQPChar(text[b]) {
				b++
			} else if text[b-1] == '=' && (text[b] == '\n' || text[b] == '\r') {
				b = lineAfter(text, b)
			} else {
				break
			}
		}
		ts.cands = append(ts.cands, candidate{start: a, end: b, kind: candQP})
		end = b
	}
	end = -1
	for _, p := range ts.esc {
		if p < end {
			continue
		}
		b := p
		count := 0
		for b+3 < len(text) && text[b] == '\\' && text[b+1] == 'x' && isHex(text[b+2]) && isHex(text[b+3]) {
			b += 4
			count++
		}
		if count >= ts.s.cfg.Decode.MinHex/2 {
			ts.cands = append(ts.cands, candidate{start: p, end: b, kind: candHexEsc})
		}
		end = b
	}
}

func isQPChar(c byte) bool { return c >= ' ' && c < 0x7f && c != '"' || c == '\t' }

// decodeCandidate decodes c. pos, for the layers that decode byte by byte (percent,
// quoted-printable), maps each decoded byte (and the end) to its offset in the candidate;
// nil means matches map to the whole candidate.
func decodeCandidate(text []byte, c candidate) (out []byte, enc string, pos []int32) {
	raw := text[c.start:c.end]
	switch c.kind {
	case candBase64, candWrapped:
		b := raw
		if c.kind == candBase64 {
			b = bytes.TrimRight(b, "=")
		} else {
			b = bytes.TrimRight(bytes.Map(func(r rune) rune {
				if r == '\n' || r == '\r' {
					return -1
				}
				return r
			}, b), "=")
		}
		if len(b)%4 == 1 {
			return nil, "", nil
		}
		e, name := base64.RawStdEncoding, encBase64
		if c.url {
			e, name = base64.RawURLEncoding, encBase64URL
		}
		out = make([]byte, e.DecodedLen(len(b)))
		n, err := e.Decode(out, b)
		if err != nil {
			return nil, "", nil
		}
		return out[:n], name, nil
	case candHex:
		if len(raw) > 2 && raw[0] == '0' && raw[1] == 'x' {
			raw = raw[2:]
		}
		out = make([]byte, len(raw)/2)
		if _, err := hex.Decode(out, raw); err != nil {
			return nil, "", nil
		}
		return out, encHex, nil
	case candHexDelim:
		out = make([]byte, 0, (len(raw)+1)/3)
		for i := 0; i+1 < len(raw); i += 3 {
			out = append(out, unhex(raw[i])<<4|unhex(raw[i+1]))
		}
		return out, encHex, nil
	case candHexEsc:
		out = make([]byte, 0, len(raw)/4)
		for i := 0; i+3 < len(raw); i += 4 {
			out = append(out, unhex(raw[i+2])<<4|unhex(raw[i+3]))
		}
		return out, encHex, nil
	case candPercent:
		out, pos = make([]byte, 0, len(raw)), make([]int32, 0, len(raw)+1)
		for i := 0; i < len(raw); {
			pos = append(pos, int32(i))
			if raw[i] == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]) {
				out = append(out, unhex(raw[i+1])<<4|unhex(raw[i+2]))
				i += 3
				continue
			}
			out = append(out, raw[i])
			i++
		}
		return out, encPercent, append(pos, int32(len(raw)))
	case candQP:
		out, pos = make([]byte, 0, len(raw)), make([]int32, 0, len(raw)+1)
		for i := 0; i < len(raw); {
			if raw[i] == '=' {
				if i+2 < len(raw) && isUpperHex(raw[i+1]) && isUpperHex(raw[i+2]) {
					pos = append(pos, int32(i))
					out = append(out, unhex(raw[i+1])<<4|unhex(raw[i+2]))
					i += 3
					continue
				}
				if j := lineAfter(raw, i+1); j > i+1 { // soft line break
					i = j
					continue
				}
			}
			pos = append(pos, int32(i))
			out = append(out, raw[i])
			i++
		}
		return out, encQP, append(pos, int32(len(raw)))
	}
	return nil, "", nil
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// inflate undoes gzip or zlib if b starts like it, reading at most limit+1 bytes. ok is false
// when b is not compressed (or not validly).
func inflate(b []byte, limit int64) (out []byte, enc string, ok bool) {
	var r io.Reader
	var err error
	switch {
	case len(b) >= 18 && b[0] == 0x1f && b[1] == 0x8b && b[2] == 8:
		r, err = gzip.NewReader(bytes.NewReader(b))
		enc = encGzip
	case len(b) >= 6 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0 && b[1]&0x20 == 0:
		r, err = zlib.NewReader(bytes.NewReader(b))
		enc = encZlib
	default:
		return nil, "", false
	}
	if err != nil {
		return nil, "", false
	}
	out, err = io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil && len(out) == 0 {
		return nil, "", false
	}
	return out, enc, true
}

// textlike reports whether decoded bytes are text worth scanning: valid UTF-8, no NUL, at most
// one control character (other than tab and line breaks) in sixteen bytes.
func textlike(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	ctl := 0
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			if c == 0 {
				return false
			}
			ctl++
		}
	}
	return ctl*16 <= len(b) && utf8.Valid(b)
}

func overlapsAny(spans [][2]int, a, b int) bool {
	for _, s := range spans {
		if a < s[1] && s[0] < b {
			return true
		}
	}
	return false
}

// decodeAndScan decodes the candidates of text and scans what decodes to text, at depth+1.
// It returns the matches, mapped to text, and why the scan stopped early if it did.
func (s *Scanner) decodeAndScan(text []byte, cands []candidate, rs *reqState, depth int, out []match) ([]match, string) {
	cut := ""
	var taken [][2]int // spans of the current group that decoded to text
	group := int32(0)
	for _, c := range cands {
		if rs.decodeCut {
			break
		}
		if c.group != group {
			group, taken = c.group, taken[:0]
		}
		if group != 0 && overlapsAny(taken, c.start, c.end) {
			continue
		}
		if c.spec && rs.wasted >= s.cfg.Decode.MaxBytes {
			continue
		}
		dec, enc, pos := decodeCandidate(text, c)
		if len(dec) == 0 {
			continue
		}
		if !textlike(dec) {
			inf, zenc, ok := inflate(dec, rs.decodeLeft)
			if !ok {
				rs.wasted += int64(len(dec))
				continue
			}
			if !rs.charge(len(inf)) {
				break
			}
			dec, enc, pos = inf, enc+" → "+zenc, nil
			if !textlike(dec) {
				continue
			}
		} else if !rs.charge(len(dec)) {
			break
		}
		if bytes.Equal(dec, text[c.start:c.end]) {
			continue // nothing was decoded
		}
		if group != 0 {
			taken = append(taken, [2]int{c.start, c.end})
		}
		view, pooled := dec, false
		if pos == nil && bytes.IndexByte(dec, '\\') >= 0 {
			var esc []escRec
			view, esc = jsonView(dec)
			pooled = esc != nil
		}
		inner, why := s.scanLayer(view, rs, depth+1)
		if pooled {
			putView(view) // matches keep offsets, not bytes
		}
		if why != "" && cut == "" {
			cut = why
		}
		for _, m := range inner {
			if pos != nil {
				m.start, m.end = c.start+int(pos[m.start]), c.start+int(pos[m.end])
			} else {
				m.start, m.end = c.start, c.end
			}
			if m.enc == "" {
				m.enc = enc
			} else {
				m.enc = enc + " → " + m.enc
			}
			out = append(out, m)
		}
	}
	if rs.decodeCut && cut == "" {
		cut = fmt.Sprintf("its encoded content needs more decoding than the %s the DLP decodes per request",
			sizeString(s.cfg.Decode.MaxBytes))
	}
	return out, cut
}
