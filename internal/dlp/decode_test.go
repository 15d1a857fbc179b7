package dlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Encoders for the request-level tests: each undoes what one decoder does.

func toB64(s string) string    { return base64.StdEncoding.EncodeToString([]byte(s)) }
func toB64Raw(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }
func toB64URL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
func toHex(s string) string    { return hex.EncodeToString([]byte(s)) }
func toHexUpper(s string) string {
	return strings.ToUpper(hex.EncodeToString([]byte(s)))
}

func toHexSep(sep string) func(string) string {
	return func(s string) string {
		var parts []string
		for _, c := range []byte(s) {
			parts = append(parts, fmt.Sprintf("%02x", c))
		}
		return strings.Join(parts, sep)
	}
}

func toHexEsc(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	return b.String()
}

// toPct percent-encodes every byte.
func toPct(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// toQP quoted-printable-encodes every byte, the way an agent hiding text would.
func toQP(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}

// toQPSoft breaks the text with soft line breaks every 7 bytes and encodes '='.
func toQPSoft(s string) string {
	var b strings.Builder
	for i, c := range []byte(s) {
		if i > 0 && i%7 == 0 {
			b.WriteString("=\r\n")
		}
		if c == '=' {
			b.WriteString("=3D")
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func toGzipB64(s string) string { return base64.StdEncoding.EncodeToString(gz([]byte(s))) }
func toZlibB64(s string) string { return base64.StdEncoding.EncodeToString(zl([]byte(s))) }

// toWrapped is base64 in lines of 76 characters.
func toWrapped(s string) string {
	e := toB64(s)
	var lines []string
	for len(e) > 76 {
		lines = append(lines, e[:76])
		e = e[76:]
	}
	return strings.Join(append(lines, e), "\r\n")
}

func chain(fs ...func(string) string) func(string) string {
	return func(s string) string {
		for _, f := range fs {
			s = f(s)
		}
		return s
	}
}

// decodeCases are the encodings and chains of issue 13, each with the chain a finding must
// name. The secret is an AWS access key (with a little text around it, as an agent would send).
var decodeCases = []struct {
	name  string
	enc   func(string) string
	chain string
}{
	{"base64", toB64, "base64"},
	{"base64 unpadded", toB64Raw, "base64"},
	{"base64url", toB64URL, "base64url"},
	{"base64 wrapped", toWrapped, "base64"},
	{"hex", toHex, "hex"},
	{"hex upper case", toHexUpper, "hex"},
	{"hex with colons", toHexSep(":"), "hex"},
	{"hex with spaces", toHexSep(" "), "hex"},
	{"hex with dashes", toHexSep("-"), "hex"},
	{"hex escapes", toHexEsc, "hex"},
	{"hex 0x", func(s string) string { return "0x" + toHex(s) }, "hex"},
	{"percent-encoding", toPct, "percent-encoding"},
	{"percent-encoding twice", chain(toPct, toPct), "percent-encoding → percent-encoding"},
	{"percent-encoding three times", chain(toPct, toPct, toPct), "percent-encoding → percent-encoding → percent-encoding"},
	{"quoted-printable", toQP, "quoted-printable"},
	{"quoted-printable soft breaks", toQPSoft, "quoted-printable"},
	{"gzip in base64", toGzipB64, "base64 → gzip"},
	{"deflate in base64", toZlibB64, "base64 → deflate"},
	{"base64 of hex", chain(toHex, toB64), "base64 → hex"},
	{"hex of base64", chain(toB64, toHex), "hex → base64"},
	{"base64 of base64", chain(toB64, toB64), "base64 → base64"},
	{"percent-encoded base64", chain(toB64, toPct), "percent-encoding → base64"},
	{"base64 of percent-encoding", chain(toPct, toB64), "base64 → percent-encoding"},
	{"base64 of gzip of hex", chain(toHex, toGzipB64), "base64 → gzip → hex"},
	{"quoted-printable of base64", chain(toB64, toQP), "quoted-printable → base64"},
}

// decodePlaces put an encoded value in each part of a request. The value goes through HTTP's
// own encoding for the place (a query value is percent-encoded once more), which the request
// parsing undoes before the scanner sees it.
var decodePlaces = []struct {
	name, where, phrase string
	req                 func(t *testing.T, v string) *http.Request
	value               func(r *http.Request) string // the value as the origin would get it
}{
	{"query", "query:q", "the query parameter q",
		func(t *testing.T, v string) *http.Request {
			return httptest.NewRequest(http.MethodGet, "https://api.example.com/search?q="+url.QueryEscape(v)+"&page=2", nil)
		},
		func(r *http.Request) string { return r.URL.Query().Get("q") }},
	{"path", "url", "the URL path",
		func(t *testing.T, v string) *http.Request {
			u := &url.URL{Scheme: "https", Host: "api.example.com", Path: "/v1/items/" + v + "/view"}
			return httptest.NewRequest(http.MethodGet, u.String(), nil)
		},
		func(r *http.Request) string {
			return strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/items/"), "/view")
		}},
	{"header", "header:X-Trace", "the header X-Trace",
		func(t *testing.T, v string) *http.Request {
			r := httptest.NewRequest(http.MethodGet, "https://api.example.com/", nil)
			r.Header.Set("X-Trace", strings.ReplaceAll(v, "\r\n", " "))
			return r
		},
		func(r *http.Request) string { return r.Header.Get("X-Trace") }},
	{"json body", "body", "the JSON body field $.data",
		func(t *testing.T, v string) *http.Request {
			b, _ := jsonMarshal(map[string]string{"data": v, "kind": "note"})
			return post(t, "https://api.example.com/notes", "application/json", b)
		},
		func(r *http.Request) string {
			var doc map[string]string
			jsonUnmarshal(readBodyNoT(r), &doc)
			return doc["data"]
		}},
	{"text body", "body", "the body",
		func(t *testing.T, v string) *http.Request {
			return post(t, "https://paste.example.com/new", "text/plain", []byte("log line\n"+v+"\nend\n"))
		},
		func(r *http.Request) string {
			return strings.TrimSuffix(strings.TrimPrefix(string(readBodyNoT(r)), "log line\n"), "\nend\n")
		}},
	{"form body", "body", "the form field data",
		func(t *testing.T, v string) *http.Request {
			return post(t, "https://forms.example.com/submit", "application/x-www-form-urlencoded", []byte("name=x&data="+url.QueryEscape(v)))
		},
		func(r *http.Request) string {
			vals, _ := url.ParseQuery(string(readBodyNoT(r)))
			return vals.Get("data")
		}},
}

func decodeSecret() (plain, key string) {
	key = "AKIA" + fakeToken(201, upnum, 16)
	return "id=" + key + "??>>", key
}

// TestDecodeChains: every encoding and chain, in every part of a request, is found, named and
// placed; and with the redact action the whole encoded value is replaced.
func TestDecodeChains(t *testing.T) {
	block := newScanner(t, Config{})
	redact := newScanner(t, Config{Actions: map[string]Action{DetectorSecret: ActionRedact}})
	plain, key := decodeSecret()
	for _, dc := range decodeCases {
		encoded := dc.enc(plain)
		for _, pl := range decodePlaces {
			if strings.Contains(dc.name, "wrapped") || strings.Contains(dc.name, "soft breaks") {
				if pl.name == "header" || pl.name == "path" {
					continue // a header or a path has no line breaks
				}
			}
			t.Run(dc.name+"/"+pl.name, func(t *testing.T) {
				r := pl.req(t, encoded)
				v, err := block.ScanRequest(r)
				if err != nil {
					t.Fatal(err)
				}
				var f *Finding
				for i := range v.Findings {
					if v.Findings[i].Rule == "aws-access-token" {
						f = &v.Findings[i]
					}
				}
				if f == nil {
					t.Fatalf("not found: %+v", v.Findings)
				}
				if f.Encoding != dc.chain || f.Where != pl.where || v.Action != ActionBlock {
					t.Errorf("encoding %q at %q (%v), want %q at %q", f.Encoding, f.Where, v.Action, dc.chain, pl.where)
				}
				want := "blocked: an AWS access key, " + dc.chain + ", in " + pl.phrase
				if !strings.HasPrefix(v.Reason, want) {
					t.Errorf("reason %q, want %q", v.Reason, want)
				}
				for _, s := range []string{key, encoded} {
					if strings.Contains(v.Reason, s) || strings.Contains(f.Excerpt, s) {
						t.Errorf("the value shows: reason %q, excerpt %q", v.Reason, f.Excerpt)
					}
				}

				r = pl.req(t, encoded)
				v, err = redact.ScanRequest(r)
				if err != nil || v.Action != ActionRedact {
					t.Fatalf("redact: %v %v", v.Action, err)
				}
				got := pl.value(r)
				if strings.Contains(got, key) || !strings.Contains(got, "[REDACTED:aws-access-token]") {
					t.Errorf("redacted value %q", got)
				}
				// Hex pairs glued to the path's '/' ("/items/69:64:...:3e/view") lose their first
				// and last pair to the path's tokens: the key is gone, two bytes of hex stay.
				glued := pl.name == "path" && (dc.name == "hex with colons" || dc.name == "hex with spaces")
				if f := v.Findings[0]; f.Encoding != "" && !strings.HasPrefix(dc.chain, "percent") && !strings.HasPrefix(dc.chain, "quoted") &&
					!glued && got != "[REDACTED:aws-access-token]" {
					t.Errorf("the encoded token was not replaced whole: %q", got)
				}
			})
		}
	}
}

// TestDecodeHost: labels of the host name are decoded too (a finding there cannot be redacted).
func TestDecodeHost(t *testing.T) {
	s := newScanner(t, Config{})
	_, key := decodeSecret()
	// Host names are case-insensitive (and lower-cased on the way), so base64 does not survive
	// in them; hex does.
	for _, label := range []string{toHex(key), toHexSep("-")(key)} {
		r := httptest.NewRequest(http.MethodGet, "https://"+label+".attacker.example/", nil)
		v, _ := s.ScanRequest(r)
		if v.Action != ActionBlock || len(v.Findings) == 0 || v.Findings[0].Where != "host" || v.Findings[0].Encoding == "" {
			t.Errorf("%s: %v %+v", label, v.Action, v.Findings)
		}
	}
}

// TestDecodeDepth: chains deeper than MaxDepth are not followed; MaxDepth is a limit, not a
// default depth.
func TestDecodeDepth(t *testing.T) {
	plain, _ := decodeSecret()
	five := chain(toHex, toB64, toHex, toB64, toHex)(plain)
	for _, c := range []struct {
		depth int
		found bool
	}{{4, false}, {5, true}} {
		s := newScanner(t, Config{Decode: DecodeConfig{MaxDepth: c.depth}})
		v := s.ScanBytes("x", []byte(five))
		if got := len(v.Findings) > 0; got != c.found {
			t.Errorf("depth %d: found %v (%+v)", c.depth, got, v.Findings)
		}
		if c.found && v.Findings[0].Encoding != "hex → base64 → hex → base64 → hex" {
			t.Errorf("chain %q", v.Findings[0].Encoding)
		}
	}
}

// TestDecodeBudget: a request that needs more decoding than MaxBytes is treated like an oversize
// body (blocked by default, passed with allow-unscanned).
func TestDecodeBudget(t *testing.T) {
	text := strings.Repeat(toB64("a harmless sentence, decoded and scanned for nothing. ")+" ", 50)
	for _, policy := range []OversizePolicy{OversizeBlock, OversizeAllowUnscanned} {
		s := newScanner(t, Config{Oversize: policy, Decode: DecodeConfig{MaxBytes: 1000}})
		v, err := s.ScanRequest(post(t, "https://x.example.com/", "text/plain", []byte(text)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(v.Unscanned, "decoding") {
			t.Errorf("%s: unscanned %q", policy, v.Unscanned)
		}
		if want := map[OversizePolicy]Action{OversizeBlock: ActionBlock, OversizeAllowUnscanned: ActionAllow}[policy]; v.Action != want {
			t.Errorf("%s: %v %q", policy, v.Action, v.Reason)
		}
	}
	// The default budget lets a 10 MB body of base64 images through.
	img := bytes.Repeat([]byte(base64.StdEncoding.EncodeToString(pngLike(rand.New(rand.NewPCG(5, 5)), 3<<20))), 1)
	body := []byte(`{"model":"vision","image":"` + string(img) + `"}`)
	v, _ := newScanner(t, Config{}).ScanRequest(post(t, "https://api.example.com/", "application/json", body))
	if v.Action != ActionAllow || v.Unscanned != "" {
		t.Errorf("base64 image: %v %q %q", v.Action, v.Reason, v.Unscanned)
	}
}

func TestDecodeOff(t *testing.T) {
	plain, _ := decodeSecret()
	s := newScanner(t, Config{Decode: DecodeConfig{Off: true}})
	if v := s.ScanBytes("x", []byte(toB64(plain))); len(v.Findings) != 0 {
		t.Errorf("decoding off, found %+v", v.Findings)
	}
	if v := newScanner(t, Config{}).ScanBytes("x", []byte(toB64(plain))); len(v.Findings) != 1 {
		t.Errorf("decoding on, found %+v", v.Findings)
	}
}

// TestDecodeOtherDetectors: decoding serves every detector, not only secrets.
func TestDecodeOtherDetectors(t *testing.T) {
	s := newScanner(t, Config{})
	_, _, pemRSA := testKeys(t)
	for _, c := range []struct{ name, text, detector string }{
		{"card in base64", toB64("card 4111 1111 1111 1111 exp 12/29"), DetectorPaymentCard},
		{"ssn in hex", toHex("ssn 536-22-1234"), DetectorUSSSN},
		{"private key in base64", toB64(pemRSA), DetectorPrivateKey},
		{"jwt in percent-encoding", toPct(mkJWT(`{"alg":"HS256"}`, `{"sub":"x"}`, "sig")), DetectorJWT},
		{"seed phrase in base64", toB64(bip39Vectors[7].phrase), DetectorSeedPhrase},
		{"wif in hex", toHex("5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ"), DetectorCryptoPrivateKey},
		{"escaped json in base64", toB64(`{"k":"\u0041KIA` + fakeToken(202, upnum, 16) + `"}`), DetectorSecret},
	} {
		v := s.ScanBytes("x", []byte("data: "+c.text+"\n"))
		if len(v.Findings) == 0 || v.Findings[0].Detector != c.detector || v.Findings[0].Encoding == "" {
			t.Errorf("%s: %+v", c.name, v.Findings)
		}
	}
}

// TestTokenMasks checks the SWAR classification against a byte-at-a-time one.
func TestTokenMasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 64)
	for it := 0; it < 20000; it++ {
		n := 1 + rng.IntN(64)
		for i := range b[:n] {
			if it%2 == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = byte(32 + rng.IntN(96))
			}
		}
		tok, low, gap := tokenMasks(b[:n], true)
		for j, c := range b[:n] {
			wt := tokClass[c] != 0 || c == 0x7f
			wl := 'a' <= c && c <= 'z'
			wg := c < '-'
			if (tok>>j&1 == 1) != wt || (low>>j&1 == 1) != wl || (gap>>j&1 == 1) != wg {
				t.Fatalf("byte %d %q of %d: tok %v low %v gap %v", j, c, n, tok>>j&1, low>>j&1, gap>>j&1)
			}
		}
		if n < 64 && (tok>>n != 0 || low>>n != 0 || gap>>n != 0) {
			t.Fatalf("bits past %d set", n)
		}
	}
}

// TestTokenPassSplit: the token pass split in two (large texts, Concurrency 2) finds what the
// whole pass finds.
func TestTokenPassSplit(t *testing.T) {
	plain, _ := decodeSecret()
	var b strings.Builder
	rng := rand.New(rand.NewPCG(9, 9))
	for b.Len() < parallelMin+200_000 {
		switch rng.IntN(4) {
		case 0:
			b.WriteString(toB64(plain) + ". ")
		case 1:
			b.WriteString(bip39Vectors[rng.IntN(4)].phrase + ". ")
		case 2:
			b.WriteString("send to 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa; ")
		default:
			b.WriteString(benchProse(rng, 30) + " ")
		}
	}
	text := []byte(b.String())
	one := newScanner(t, Config{Concurrency: 1}).ScanBytes("x", text)
	two := newScanner(t, Config{Concurrency: 2}).ScanBytes("x", text)
	if len(one.Findings) == 0 || len(one.Findings) != len(two.Findings) {
		t.Fatalf("%d findings sequentially, %d split", len(one.Findings), len(two.Findings))
	}
	for i := range one.Findings {
		if one.Findings[i].Offset != two.Findings[i].Offset || one.Findings[i].Rule != two.Findings[i].Rule {
			t.Fatalf("finding %d: %+v vs %+v", i, one.Findings[i], two.Findings[i])
		}
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// readBodyNoT reads a request body (for helpers that have no *testing.T).
func readBodyNoT(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

// pngLike returns n bytes shaped like a PNG file: the signature and chunk headers around random
// (compressed-looking) data.
func pngLike(rng *rand.Rand, n int) []byte {
	b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x04\x00\x00\x00\x03\x00\x08\x02\x00\x00\x00\x8a\x1b\x6e\x2d\x00\x10\x00\x00IDAT\x78\x9c")
	for len(b) < n {
		b = append(b, byte(rng.IntN(256)))
	}
	return b
}

// TestDecodeWasted: decoding that gives no text does not cut a request (a large listing of paths
// with capitals), and past the budget only the pieces of tokens stop being tried.
func TestDecodeWasted(t *testing.T) {
	var b strings.Builder
	rng := rand.New(rand.NewPCG(11, 11))
	for b.Len() < 400_000 {
		fmt.Fprintf(&b, "/Users/Alice%d/Documents/Projects/Quarterly%dReport/Draft%d/Final\n", rng.IntN(1000), rng.IntN(100), rng.IntN(10))
	}
	plain, _ := decodeSecret()
	body := b.String() + "token " + toB64(plain) + "\n"
	s := newScanner(t, Config{Decode: DecodeConfig{MaxBytes: 64 << 10}})
	v, err := s.ScanRequest(post(t, "https://files.example.com/index", "text/plain", []byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if v.Unscanned != "" || v.Action != ActionBlock || len(v.Findings) != 1 || v.Findings[0].Encoding != "base64" {
		t.Errorf("verdict %v %q, unscanned %q, findings %+v", v.Action, v.Reason, v.Unscanned, v.Findings)
	}
}
