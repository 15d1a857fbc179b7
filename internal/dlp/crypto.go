package dlp

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"strings"
)

// Cryptocurrency detectors. Candidates come from the token pass (decode.go), which hands over
// every maximal run of letters and digits; each kind is then checked in full:
//
//   - Bitcoin P2PKH and P2SH addresses: 26-35 base58 characters starting with 1 or 3 that
//     decode (base58check) to version 0x00 or 0x05, a 20-byte hash and a 4-byte checksum equal
//     to the first bytes of SHA-256(SHA-256(version+hash)). A random string passes with
//     probability 2^-32.
//   - Bitcoin segwit addresses: "bc1" and bech32 (witness v0, program of 20 or 32 bytes) or
//     bech32m (v1 to v16, taproot's is v1 with 32 bytes), checksum verified (30 bits), all
//     lower or all upper case.
//   - Ethereum addresses: "0x" and 40 hex digits, not followed by more. With mixed case the
//     EIP-55 checksum (the case of each letter is a bit of Keccak-256 of the lower-case
//     address) must hold, which a hash never does by chance. All lower or all upper case
//     carries no checksum, and 40 hex digits after 0x are also how hashes and ids are written,
//     so those count only with a context word (eth, wallet, address, recipient, ...) in the 64
//     bytes before.
//   - WIF private keys: 51 or 52 base58 characters starting with 5, K or L that decode
//     (base58check) to 0x80, 32 key bytes, an optional 0x01 (compressed) and the checksum.
//   - BIP-39 seed phrases: 12, 15, 18, 21 or 24 words of the English wordlist (2048 words,
//     bip39_english.txt, public domain; its SHA-256 is checked by a test) separated by blanks
//     or commas, whose checksum holds: the last CS = words/3 bits are the first bits of
//     SHA-256 of the entropy the other bits encode. The phrase must make up the run of wordlist
//     words it is in, give or take two words at either end ("my seed is <12 words> thanks"): a
//     12-word checksum is only 4 bits, and prose made of wordlist words would otherwise match
//     one window in sixteen.
//
// Addresses are logged by default (DefaultActions): they are public, and payment pages, block
// explorers and wallets send them. WIF keys and seed phrases are the funds themselves: blocked.

//go:embed bip39_english.txt
var bip39Text string

// bip39Index maps a word to its index in the wordlist.
var bip39Index = func() map[string]int {
	m := make(map[string]int, 2048)
	for i, w := range strings.Fields(bip39Text) {
		m[w] = i
	}
	return m
}()

// bip39Filter has a bit for a hash of the first four letters (or all three) of each wordlist
// word, which identify it. The token pass tests every lower-case word of 3 to 8 letters against
// it (8 KiB: it stays in the L1 cache), so a run of words is looked up in bip39Index only when
// it may be a phrase; other words pass with probability ~3%.
var bip39Filter = func() (f [1024]uint64) {
	for w := range bip39Index {
		h := bip39Hash([]byte(w))
		f[h/64] |= 1 << (h % 64)
	}
	return f
}()

func bip39Hash(w []byte) uint32 {
	var k uint32
	for i := 0; i < 4 && i < len(w); i++ {
		k |= uint32(w[i]) << (8 * i)
	}
	return k * 0x9E3779B1 >> 16
}

// bip39Maybe reports whether a word of 3 to 8 lower-case letters may be a wordlist word.
func bip39Maybe(w []byte) bool {
	h := bip39Hash(w)
	return bip39Filter[h/64]&(1<<(h%64)) != 0
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		t[base58Alphabet[i]] = int8(i)
	}
	return t
}()

// base58Decode decodes s, or returns nil if it has a character outside the alphabet. Inputs are
// at most 52 characters here, so the quadratic big-number loop is cheap.
func base58Decode(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for _, c := range s {
		v := base58Value[c]
		if v < 0 {
			return nil
		}
		carry := int(v)
		for i := range out {
			carry += int(out[i]) * 58
			out[i] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			out = append(out, byte(carry))
			carry >>= 8
		}
	}
	for _, c := range s { // leading '1's are leading zero bytes
		if c != '1' {
			break
		}
		out = append(out, 0)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// base58Check decodes s and verifies its 4-byte checksum; it returns the payload (version
// included) or nil.
func base58Check(s []byte) []byte {
	b := base58Decode(s)
	if len(b) < 5 {
		return nil
	}
	payload, sum := b[:len(b)-4], b[len(b)-4:]
	h1 := sha256.Sum256(payload)
	h2 := sha256.Sum256(h1[:])
	if !bytes.Equal(h2[:4], sum) {
		return nil
	}
	return payload
}

// checkCryptoRun checks a run of letters and digits for the cryptocurrency shapes, and returns
// the match if one holds.
func (s *Scanner) checkCryptoRun(text []byte, a, b int) (match, bool) {
	run := text[a:b]
	n := len(run)
	switch {
	case n == 42 && run[0] == '0' && (run[1] == 'x' || run[1] == 'X'):
		if !s.on[DetectorCryptoAddress] {
			return match{}, false
		}
		return s.ethereumAt(text, a, b)
	case n >= 14 && n <= 90 && (string(run[:3]) == "bc1" || string(run[:3]) == "BC1"):
		if !s.on[DetectorCryptoAddress] || !segwitValid(run) {
			return match{}, false
		}
		rule, desc := "bitcoin-bech32", "a Bitcoin address (bech32)"
		if run[3] != 'q' && run[3] != 'Q' {
			rule, desc = "bitcoin-taproot", "a Bitcoin address (bech32m)"
		}
		return match{detector: DetectorCryptoAddress, rule: rule, desc: desc, start: a, end: b,
			action: s.cfg.action(DetectorCryptoAddress, "")}, true
	case n >= 26 && n <= 35 && (run[0] == '1' || run[0] == '3'):
		if !s.on[DetectorCryptoAddress] {
			return match{}, false
		}
		p := base58Check(run)
		if len(p) != 21 || (p[0] != 0x00 && p[0] != 0x05) {
			return match{}, false
		}
		rule, desc := "bitcoin-p2pkh", "a Bitcoin address (P2PKH)"
		if p[0] == 0x05 {
			rule, desc = "bitcoin-p2sh", "a Bitcoin address (P2SH)"
		}
		return match{detector: DetectorCryptoAddress, rule: rule, desc: desc, start: a, end: b,
			action: s.cfg.action(DetectorCryptoAddress, "")}, true
	case (n == 51 && run[0] == '5') || (n == 52 && (run[0] == 'K' || run[0] == 'L')):
		if !s.on[DetectorCryptoPrivateKey] {
			return match{}, false
		}
		p := base58Check(run)
		if p == nil || p[0] != 0x80 || !(len(p) == 33 || (len(p) == 34 && p[33] == 0x01)) {
			return match{}, false
		}
		return match{detector: DetectorCryptoPrivateKey, rule: "wif", desc: "a Bitcoin private key (WIF)",
			start: a, end: b, action: s.cfg.action(DetectorCryptoPrivateKey, "")}, true
	}
	return match{}, false
}

// ethContext are the words that make an all-lower or all-upper 0x address count.
var ethContext = []string{"eth", "ether", "ethereum", "wallet", "address", "addr", "recipient", "beneficiary",
	"erc20", "erc-20", "erc721", "metamask", "web3", "usdt", "usdc", "deposit", "withdraw", "payout", "send to", "pay to"}

func (s *Scanner) ethereumAt(text []byte, a, b int) (match, bool) {
	hexPart := text[a+2 : b]
	var up, lo bool
	for _, c := range hexPart {
		switch {
		case '0' <= c && c <= '9':
		case 'a' <= c && c <= 'f':
			lo = true
		case 'A' <= c && c <= 'F':
			up = true
		default:
			return match{}, false
		}
	}
	m := match{detector: DetectorCryptoAddress, rule: "ethereum", desc: "an Ethereum address", start: a, end: b,
		action: s.cfg.action(DetectorCryptoAddress, "")}
	if up && lo {
		return m, eip55Valid(hexPart)
	}
	if bytes.Count(hexPart, []byte("0")) > 30 { // 0x000...0001: a constant, not an account
		return match{}, false
	}
	return m, hasContextWord(text, a, 64, ethContext)
}

// eip55Valid checks the EIP-55 checksum of 40 mixed-case hex digits.
func eip55Valid(h []byte) bool {
	lower := bytes.ToLower(h)
	sum := keccak256(lower)
	for i, c := range h {
		if c <= '9' {
			continue
		}
		bit := sum[i/2] >> (4 * (1 - uint(i%2))) & 0xf
		if (bit >= 8) != (c <= 'Z') {
			return false
		}
	}
	return true
}

// hasContextWord reports whether one of words (lower case) starts at a word boundary in the
// window bytes before pos, ASCII case ignored.
func hasContextWord(text []byte, pos, window int, words []string) bool {
	lo := max(0, pos-window)
	w := bytes.ToLower(text[lo:pos])
	for _, word := range words {
		for off := 0; ; {
			k := bytes.Index(w[off:], []byte(word))
			if k < 0 {
				break
			}
			k += off
			var prev byte // the byte before the word, 0 at the start of text
			if lo+k > 0 {
				prev = text[lo+k-1]
			}
			if byteClass[prev]&(clsUpper|clsLower) == 0 {
				return true
			}
			off = k + 1
		}
	}
	return false
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

var bech32Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(bech32Charset); i++ {
		c := bech32Charset[i]
		t[c] = int8(i)
		if 'a' <= c && c <= 'z' {
			t[c-'a'+'A'] = int8(i)
		}
	}
	return t
}()

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>uint(i))&1 != 0 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

// segwitValid checks a "bc1" address: one case, bech32 or bech32m checksum as the witness
// version requires, and a program of a valid length.
func segwitValid(addr []byte) bool {
	var up, lo bool
	for _, c := range addr {
		up = up || ('A' <= c && c <= 'Z')
		lo = lo || ('a' <= c && c <= 'z')
	}
	if up && lo || len(addr) < 14 || len(addr) > 90 {
		return false
	}
	data := make([]byte, 0, len(addr)-3)
	for _, c := range addr[3:] {
		v := bech32Value[c]
		if v < 0 {
			return false
		}
		data = append(data, byte(v))
	}
	if len(data) < 7 {
		return false
	}
	values := []byte{3, 3, 0, 2, 3} // "bc" expanded: high bits, 0, low bits
	values = append(values, data...)
	const bech32Const, bech32mConst = 1, 0x2bc830a3
	c := bech32Polymod(values)
	ver := data[0]
	if ver > 16 || (ver == 0 && c != bech32Const) || (ver > 0 && c != bech32mConst) {
		return false
	}
	// The program: 5-bit groups (version and checksum excluded) to bytes, padding ≤ 4 zero bits.
	acc, nbits, n := 0, 0, 0
	for _, v := range data[1 : len(data)-6] {
		acc = acc<<5 | int(v)
		nbits += 5
		for nbits >= 8 {
			nbits -= 8
			n++
		}
	}
	if nbits > 4 || acc&(1<<nbits-1) != 0 {
		return false
	}
	return n >= 2 && n <= 40 && (ver != 0 || n == 20 || n == 32)
}

// seedGap reports whether the bytes between two words may separate words of a phrase.
func seedGap(b []byte) bool {
	if len(b) == 0 || len(b) > 8 {
		return false
	}
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n', ',', '"', '\'':
		default:
			return false
		}
	}
	return true
}

// seedPhrases checks a run of word-shaped tokens (lower-case letters, 3-8 of them, separated
// as seedGap allows) for BIP-39 phrases.
func (s *Scanner) seedPhrases(text []byte, words [][2]int, out []match) []match {
	idx := make([]int, len(words))
	for i, w := range words {
		v, ok := bip39Index[string(text[w[0]:w[1]])]
		if !ok {
			v = -1
		}
		idx[i] = v
	}
	for a := 0; a < len(idx); {
		if idx[a] < 0 {
			a++
			continue
		}
		b := a
		for b < len(idx) && idx[b] >= 0 {
			b++
		}
		if m, ok := s.seedInRun(text, words[a:b], idx[a:b]); ok {
			out = append(out, m)
		}
		a = b
	}
	return out
}

// seedInRun finds a phrase that makes up a run of wordlist words, give or take two words at
// either end; the longest phrase wins.
func (s *Scanner) seedInRun(text []byte, words [][2]int, idx []int) (match, bool) {
	l := len(idx)
	for _, n := range []int{24, 21, 18, 15, 12} {
		for a := 0; a <= 2 && a+n <= l; a++ {
			if l-(a+n) > 2 {
				continue
			}
			if bip39Checksum(idx[a : a+n]) {
				return match{detector: DetectorSeedPhrase, rule: "bip39",
					desc:  "a BIP-39 seed phrase (" + itoa(n) + " words)",
					start: words[a][0], end: words[a+n-1][1], action: s.cfg.action(DetectorSeedPhrase, "")}, true
			}
		}
	}
	return match{}, false
}

// bip39Checksum verifies the checksum of a phrase given as word indices (12 to 24, a multiple of 3).
func bip39Checksum(idx []int) bool {
	n := len(idx)
	totalBits := n * 11
	csBits := n / 3
	entBits := totalBits - csBits
	var buf [33]byte // 24 words = 264 bits
	for i, v := range idx {
		for k := 0; k < 11; k++ {
			if v>>(10-k)&1 != 0 {
				bit := i*11 + k
				buf[bit/8] |= 0x80 >> (bit % 8)
			}
		}
	}
	sum := sha256.Sum256(buf[:entBits/8])
	for k := 0; k < csBits; k++ {
		bit := entBits + k
		got := buf[bit/8] >> (7 - bit%8) & 1
		want := sum[k/8] >> (7 - k%8) & 1
		if got != want {
			return false
		}
	}
	return true
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
