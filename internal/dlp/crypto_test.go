package dlp

import (
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// base58CheckEncode is the encoder the detector's decoder is checked against.
func base58CheckEncode(payload []byte) string {
	h1 := sha256.Sum256(payload)
	h2 := sha256.Sum256(h1[:])
	b := append(append([]byte(nil), payload...), h2[:4]...)
	n := new(big.Int).SetBytes(b)
	var out []byte
	mod, base := new(big.Int), big.NewInt(58)
	for n.Sign() > 0 {
		n.DivMod(n, base, mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// segwitEncode encodes a witness program as a "bc1" address (BIP-173, BIP-350).
func segwitEncode(version byte, program []byte) string {
	data := []byte{version}
	acc, nbits := 0, 0
	for _, b := range program {
		acc = acc<<8 | int(b)
		nbits += 8
		for nbits >= 5 {
			nbits -= 5
			data = append(data, byte(acc>>nbits&31))
		}
	}
	if nbits > 0 {
		data = append(data, byte(acc<<(5-nbits)&31))
	}
	values := append([]byte{3, 3, 0, 2, 3}, data...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	c := uint32(1)
	if version > 0 {
		c = 0x2bc830a3
	}
	mod := bech32Polymod(values) ^ c
	for i := 0; i < 6; i++ {
		data = append(data, byte(mod>>(5*(5-i))&31))
	}
	var b strings.Builder
	b.WriteString("bc1")
	for _, d := range data {
		b.WriteByte(bech32Charset[d])
	}
	return b.String()
}

// eip55 writes 20 bytes as a checksummed Ethereum address.
func eip55(addr []byte) string {
	h := hex.EncodeToString(addr)
	sum := keccak256([]byte(h))
	out := []byte(h)
	for i, c := range out {
		if c > '9' && sum[i/2]>>(4*(1-uint(i%2)))&0xf >= 8 {
			out[i] = c - 'a' + 'A'
		}
	}
	return "0x" + string(out)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

func TestKeccak256(t *testing.T) {
	for in, want := range map[string]string{
		"":    "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470",
		"abc": "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45",
		// more than one 136-byte block
		strings.Repeat("a", 200): "",
	} {
		got := keccak256([]byte(in))
		if want != "" && hex.EncodeToString(got[:]) != want {
			t.Errorf("keccak256(%q) = %x, want %s", in, got, want)
		}
	}
}

// TestBIP39Wordlist checks the embedded wordlist against the published file's SHA-256 and the
// properties BIP-39 states: 2048 words, sorted, unique in their first four letters.
func TestBIP39Wordlist(t *testing.T) {
	sum := sha256.Sum256([]byte(bip39Text))
	if got := hex.EncodeToString(sum[:]); got != "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda" {
		t.Errorf("bip39_english.txt SHA-256 %s, not the published english.txt", got)
	}
	words := strings.Fields(bip39Text)
	prefixes := map[string]bool{}
	for i, w := range words {
		if i > 0 && words[i-1] >= w {
			t.Errorf("not sorted at %q", w)
		}
		p := w[:min(4, len(w))]
		if prefixes[p] {
			t.Errorf("prefix %q twice", p)
		}
		prefixes[p] = true
		if !bip39Maybe([]byte(w)) {
			t.Errorf("bip39Maybe(%q) is false", w)
		}
	}
	if len(words) != 2048 || len(bip39Index) != 2048 {
		t.Errorf("%d words", len(words))
	}
}

// bip39Vectors are phrases of the BIP-39 test vectors (Trezor's vectors.json) with their
// entropy.
var bip39Vectors = []struct{ entropy, phrase string }{
	{"00000000000000000000000000000000", "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"},
	{"7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f", "legal winner thank year wave sausage worth useful legal winner thank yellow"},
	{"80808080808080808080808080808080", "letter advice cage absurd amount doctor acoustic avoid letter advice cage above"},
	{"ffffffffffffffffffffffffffffffff", "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong"},
	{"0000000000000000000000000000000000000000000000000000000000000000", "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon art"},
	{"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo vote"},
	{"9e885d952ad362caeb4efe34a8e91bd2", "ozone drill grab fiber curtain grace pudding thank cruise elder eight picnic"},
	{"c0ba5a8e914111210f2bd131f3d5e08d", "scheme spot photo card baby mountain device kick cradle pact join borrow"},
	{"23db8160a31d3e0dca3688ed941adbf3", "cat swing flag economy stadium alone churn speed unique patch report train"},
}

// mnemonic encodes entropy as a phrase, the way BIP-39 does.
func mnemonic(entropy []byte) string {
	sum := sha256.Sum256(entropy)
	bitsOf := func(b []byte, i int) int { return int(b[i/8]>>(7-i%8)) & 1 }
	n := len(entropy) * 8
	cs := n / 32
	words := strings.Fields(bip39Text)
	var out []string
	for w := 0; w < (n+cs)/11; w++ {
		v := 0
		for k := 0; k < 11; k++ {
			i := w*11 + k
			var bit int
			if i < n {
				bit = bitsOf(entropy, i)
			} else {
				bit = bitsOf(sum[:], i-n)
			}
			v = v<<1 | bit
		}
		out = append(out, words[v])
	}
	return strings.Join(out, " ")
}

func TestBIP39Vectors(t *testing.T) {
	for _, v := range bip39Vectors {
		e, _ := hex.DecodeString(v.entropy)
		if got := mnemonic(e); got != v.phrase {
			t.Errorf("mnemonic(%s) = %q, want %q", v.entropy, got, v.phrase)
		}
		var idx []int
		for _, w := range strings.Fields(v.phrase) {
			idx = append(idx, bip39Index[w])
		}
		if !bip39Checksum(idx) {
			t.Errorf("checksum of %q fails", v.phrase)
		}
	}
}

func TestSeedPhrases(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 39))
	p12 := mnemonic(randBytes(rng, 16))
	p15 := mnemonic(randBytes(rng, 20))
	p18 := mnemonic(randBytes(rng, 24))
	p21 := mnemonic(randBytes(rng, 28))
	p24 := mnemonic(randBytes(rng, 32))
	words := strings.Fields(p12)
	bad := append(append([]string(nil), words[:11]...), words[0])
	badPhrase := strings.Join(bad, " ")
	for { // a 12-word phrase whose checksum fails
		var idx []int
		for _, w := range strings.Fields(badPhrase) {
			idx = append(idx, bip39Index[w])
		}
		if !bip39Checksum(idx) {
			break
		}
		bad[11] = strings.Fields(bip39Text)[rng.IntN(2048)]
		badPhrase = strings.Join(bad, " ")
	}
	runDetectorCases(t, only(DetectorSeedPhrase), DetectorSeedPhrase, []detectorCase{
		{"test vector 1", bip39Vectors[0].phrase, bip39Vectors[0].phrase},
		{"test vector legal winner", "seed: " + bip39Vectors[1].phrase + ".", bip39Vectors[1].phrase},
		{"test vector 24 words", bip39Vectors[4].phrase, bip39Vectors[4].phrase},
		{"generated 12", p12, p12},
		{"generated 15", "mnemonic=" + p15, p15},
		{"generated 18", `{"mnemonic":"` + p18 + `"}`, p18},
		{"generated 21", "words:\n" + p21 + "\n", p21},
		{"generated 24", p24, p24},
		{"one per line", strings.ReplaceAll(p12, " ", "\n"), strings.ReplaceAll(p12, " ", "\n")},
		{"json array", `["` + strings.ReplaceAll(p12, " ", `","`) + `"]`, strings.ReplaceAll(p12, " ", `","`)},
		{"in prose", "my seed is " + p12 + " thanks", p12},
		{"after a wordlist word", "phrase " + bip39Vectors[7].phrase + ".", bip39Vectors[7].phrase},

		{"checksum fails", badPhrase, ""},
		{"eleven words", strings.Join(words[:11], " "), ""},
		{"inside a longer run of wordlist words", "abandon ability able " + p12 + " about above absent", ""},
		{"capitalised", strings.ToUpper(p12[:1]) + p12[1:], ""},
		{"words glued with dashes", strings.ReplaceAll(p12, " ", "-"), ""},
		{"prose of wordlist words", "please review the order history and update the shipping address before the next delivery window opens", ""},
		{"english prose", "The quick brown fox jumps over the lazy dog while the cat watches from the window sill all day long.", ""},
		{"wordlist excerpt", strings.Join(strings.Fields(bip39Text)[:40], " "), ""},
		{"code", "for i in range(10): print(i)", ""},
		{"not wordlist words", "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt", ""},
		{"too many words between", strings.Join(words[:6], " ") + " the " + strings.Join(words[6:], " "), ""},
	})
}

func TestBitcoinAddresses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 0xb7c))
	p2pkh := base58CheckEncode(append([]byte{0}, randBytes(rng, 20)...))
	p2sh := base58CheckEncode(append([]byte{5}, randBytes(rng, 20)...))
	wpkh := segwitEncode(0, randBytes(rng, 20))
	wsh := segwitEncode(0, randBytes(rng, 32))
	tr := segwitEncode(1, randBytes(rng, 32))
	wrongVersion := base58CheckEncode(append([]byte{0x6f}, randBytes(rng, 20)...)) // testnet
	flipped := []byte(p2pkh)
	flipped[10] = map[bool]byte{true: 'a', false: 'b'}[flipped[10] != 'a']
	bechFlip := []byte(wpkh)
	bechFlip[20] = map[bool]byte{true: 'q', false: 'p'}[bechFlip[20] != 'q']
	v0With32AsBech32m := segwitEncode(0, randBytes(rng, 32))
	v0With32AsBech32m = v0With32AsBech32m[:len(v0With32AsBech32m)-6] + segwitEncode(1, randBytes(rng, 32))[len(v0With32AsBech32m)-6:]
	runDetectorCases(t, only(DetectorCryptoAddress), DetectorCryptoAddress, []detectorCase{
		{"genesis", "send to 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa please", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"},
		{"wiki p2pkh", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"},
		{"wiki p2sh", `{"to":"3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"}`, "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"},
		{"burn address", "1111111111111111111114oLvT2", "1111111111111111111114oLvT2"},
		{"generated p2pkh", p2pkh, p2pkh},
		{"generated p2sh in url", "/address/" + p2sh + "/txs", p2sh},
		{"bip173 p2wpkh", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"},
		{"bip173 upper case", "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4"},
		{"generated p2wpkh", "addr=" + wpkh, wpkh},
		{"generated p2wsh", wsh, wsh},
		{"generated taproot", tr, tr},
		{"bitcoin uri", "bitcoin:" + p2pkh + "?amount=0.1", p2pkh},

		{"checksum broken", string(flipped), ""},
		{"bech32 checksum broken", string(bechFlip), ""},
		{"v0 with bech32m checksum", v0With32AsBech32m, ""},
		{"mixed case bech32", "bc1qW508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", ""},
		{"testnet version", wrongVersion, ""},
		{"sha-256 hex", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ""},
		{"random base58", "1" + strings.Repeat("aB3", 11), ""},
		{"uuid", "3fa85f64-5717-4562-b3fc-2c963f66afa6", ""},
		{"git commit", "e07b521a8c4f3d2b9e1f0a6c5d4e3f2a1b0c9d8e", ""},
		{"npm integrity", "sha512-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08+/Zz==", ""},
		{"order id", "ORD-1A1zP1eP5QGefi2DMPTfTL5", ""},
		{"glued to a word", "x1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", ""},
	})
}

func TestEthereumAddresses(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 0xe7))
	gen := eip55(randBytes(rng, 20))
	gen2 := eip55(randBytes(rng, 20))
	lower := strings.ToLower(eip55(randBytes(rng, 20)))
	broken := []byte(gen)
	for i := 2; i < len(broken); i++ { // flip the case of one letter
		if c := broken[i]; c >= 'a' && c <= 'f' {
			broken[i] = c - 'a' + 'A'
			break
		} else if c >= 'A' && c <= 'F' {
			broken[i] = c - 'A' + 'a'
			break
		}
	}
	runDetectorCases(t, only(DetectorCryptoAddress), DetectorCryptoAddress, []detectorCase{
		{"eip55 vector 1", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"},
		{"eip55 vector 2", "to 0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"},
		{"eip55 vector 3", `"0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"`, "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"},
		{"eip55 vector 4", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"},
		{"generated", gen, gen},
		{"generated in url", "/v1/accounts/" + gen2 + "/balance", gen2},
		{"all upper with context", "wallet address: 0x52908400098527886E0F7030069857D2E4169EE7", "0x52908400098527886E0F7030069857D2E4169EE7"},
		{"all upper vector", "ETH 0x8617E340B3D01FA5F11F306F4090FD50E238070D", "0x8617E340B3D01FA5F11F306F4090FD50E238070D"},
		{"all lower with context", "recipient=0xde709f2102306220921060314715629080e2fb77", "0xde709f2102306220921060314715629080e2fb77"},
		{"lower in json with context", `{"address":"` + lower + `"}`, lower},
		{"lower vector with eth", "send 1 eth to 0x27b1fdb04752bbc536007a920d24acb045561c26", "0x27b1fdb04752bbc536007a920d24acb045561c26"},

		{"checksum broken", string(broken), ""},
		{"lower without context", "commit 0xde709f2102306220921060314715629080e2fb77 merged", ""},
		{"context word inside another", "method 0xde709f2102306220921060314715629080e2fb77", ""},
		{"tx hash", "wallet tx 0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060", ""},
		{"39 digits", "address 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe", ""},
		{"41 digits", "address 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed1", ""},
		{"not hex", "address 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg", ""},
		{"zero address", "address 0x0000000000000000000000000000000000000000", ""},
		{"sha1 without 0x", "address de709f2102306220921060314715629080e2fb77", ""},
		{"uuid", "wallet 3fa85f64-5717-4562-b3fc-2c963f66afa6", ""},
		{"git sha", "e07b521a8c4f3d2b9e1f0a6c5d4e3f2a1b0c9d8e", ""},
	})
}

func TestWIFKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0x3f))
	key := func() []byte {
		k := randBytes(rng, 32)
		k[0] = max(k[0], 1)
		return k
	}
	unc := base58CheckEncode(append([]byte{0x80}, key()...))
	comp := base58CheckEncode(append(append([]byte{0x80}, key()...), 1))
	comp2 := base58CheckEncode(append(append([]byte{0x80}, key()...), 1))
	testnet := base58CheckEncode(append(append([]byte{0xef}, key()...), 1))
	badSuffix := base58CheckEncode(append(append([]byte{0x80}, key()...), 2))
	broken := []byte(unc)
	broken[20] = map[bool]byte{true: 'a', false: 'b'}[broken[20] != 'a']
	runDetectorCases(t, only(DetectorCryptoPrivateKey), DetectorCryptoPrivateKey, []detectorCase{
		{"wiki uncompressed", "5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ", "5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ"},
		{"wiki compressed", "KwdMAjGmerYanjeui5SHS7JkmpZvVipYvB2LJGU1ZxJwYvP98617", "KwdMAjGmerYanjeui5SHS7JkmpZvVipYvB2LJGU1ZxJwYvP98617"},
		{"generated uncompressed", unc, unc},
		{"generated compressed", comp, comp},
		{"in json", `{"wif":"` + comp2 + `"}`, comp2},
		{"in env", "BTC_KEY=" + unc + "\n", unc},
		{"in url", "/import/" + comp + "?label=x", comp},
		{"quoted", "'" + comp2 + "'", comp2},
		{"after colon", "key:" + unc, unc},
		{"in prose", "my key is " + comp + ", keep it", comp},

		{"checksum broken", string(broken), ""},
		{"testnet", testnet, ""},
		{"wrong compression flag", badSuffix, ""},
		{"address", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", ""},
		{"random 51", "5" + strings.Repeat("Hk9", 16) + "ab", ""},
		{"random 52", "K" + strings.Repeat("Hk9", 17), ""},
		{"sha-256", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ""},
		{"base64", "dGhpcyBpcyBub3QgYSBwcml2YXRlIGtleSBhdCBhbGwgcmVhbGx5", ""},
		{"glued", "x" + unc, ""},
		{"longer run", unc + "Z", ""},
	})
}
