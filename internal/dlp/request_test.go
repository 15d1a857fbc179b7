package dlp

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

const (
	testCard   = "4111111111111111"
	testGitHub = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
	testIBAN   = "DE89370400440532013000"
)

func newScanner(t *testing.T, cfg Config) *Scanner {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func post(t *testing.T, target, ctype string, body []byte) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return r
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zl(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func readBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func multipartBody(t *testing.T, parts ...[3]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts { // name, filename, content
		var w io.Writer
		var err error
		if p[1] != "" {
			w, err = mw.CreateFormFile(p[0], p[1])
		} else {
			w, err = mw.CreateFormField(p[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p[2])
	}
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// TestScanRequestPlaces checks that a finding is located and explained in each part of a request.
func TestScanRequestPlaces(t *testing.T) {
	s := newScanner(t, Config{})
	mp, mpType := multipartBody(t, [3]string{"note", "", "hi"}, [3]string{"file", "cards.csv", "name,card\njane," + testCard + "\n"})
	mpName, mpNameType := multipartBody(t, [3]string{"file", "jane@example.com " + testGitHub + ".txt", "nothing"})
	cases := []struct {
		name          string
		req           func() *http.Request
		where, field  string
		detector      string
		reasonContain string
	}{
		{"json field", func() *http.Request {
			return post(t, "https://api.example.com/pay", "application/json", []byte(`{"payment":{"card":"`+testCard+`","amount":12}}`))
		}, "body", "$.payment.card", DetectorPaymentCard, "blocked: a payment card number (Visa) in the JSON body field $.payment.card"},
		{"json number in array", func() *http.Request {
			return post(t, "https://api.example.com/pay", "application/json; charset=utf-8", []byte(`{"cards":[1,`+testCard+`]}`))
		}, "body", "$.cards[1]", DetectorPaymentCard, "field $.cards[1]"},
		{"json escapes hide nothing", func() *http.Request {
			return post(t, "https://api.example.com/", "application/json", []byte(`{"t":"\u0067hp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"}`))
		}, "body", "$.t", DetectorSecret, "a GitHub personal access token in the JSON body field $.t"},
		{"json key", func() *http.Request {
			return post(t, "https://api.example.com/", "application/json", []byte(`{"`+testGitHub+`":1}`))
		}, "body", "$.[REDACTED]", DetectorSecret, "field $.[REDACTED]"},
		{"form", func() *http.Request {
			return post(t, "https://shop.example.com/checkout", "application/x-www-form-urlencoded", []byte("name=Jane&cc="+url.QueryEscape("4111 1111 1111 1111")))
		}, "body", "cc", DetectorPaymentCard, "the form field cc"},
		{"multipart file", func() *http.Request {
			return post(t, "https://upload.example.com/", mpType, mp)
		}, "body", "part:file", DetectorPaymentCard, `multipart part "file"`},
		{"multipart filename", func() *http.Request {
			return post(t, "https://upload.example.com/", mpNameType, mpName)
		}, "body", "part:file filename", DetectorSecret, `the file name of multipart part "file"`},
		{"gzip text", func() *http.Request {
			r := post(t, "https://logs.example.com/", "text/plain", gz([]byte("token "+testGitHub+"\n")))
			r.Header.Set("Content-Encoding", "gzip")
			return r
		}, "body", "", DetectorSecret, "in the body"},
		{"deflate json", func() *http.Request {
			r := post(t, "https://logs.example.com/", "application/json", zl([]byte(`{"iban":"`+testIBAN+`"}`)))
			r.Header.Set("Content-Encoding", "deflate")
			return r
		}, "body", "$.iban", DetectorIBAN, "redacted: an IBAN (DE)"},
		{"unknown type as raw bytes", func() *http.Request {
			return post(t, "https://x.example.com/", "application/octet-stream", []byte("\x00\x01"+testGitHub+"\xff"))
		}, "body", "", DetectorSecret, "in the body"},
		{"header", func() *http.Request {
			r := post(t, "https://api.example.com/", "", nil)
			r.Header.Set("X-Debug", "github token "+testGitHub)
			return r
		}, "header:X-Debug", "", DetectorSecret, "in the header X-Debug"},
		{"query", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "https://api.example.com/search?q=x&key="+testGitHub, nil)
		}, "query:key", "", DetectorSecret, "in the query parameter key"},
		{"percent-encoded path", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "https://api.example.com/cards/4111%201111%201111%201111", nil)
		}, "url", "", DetectorPaymentCard, "in the URL path"},
		{"host", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "https://"+strings.ToLower(testIBAN)+"x.4111111111111111.attacker.example/", nil)
		}, "host", "", DetectorPaymentCard, "in the host name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.req()
			v, err := s.ScanRequest(r)
			if err != nil {
				t.Fatal(err)
			}
			var f *Finding
			for i := range v.Findings {
				if v.Findings[i].Detector == c.detector {
					f = &v.Findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no %s finding in %+v", c.detector, v.Findings)
			}
			if f.Where != c.where || f.Field != c.field {
				t.Errorf("found at %q %q, want %q %q", f.Where, f.Field, c.where, c.field)
			}
			if !strings.Contains(v.Reason, c.reasonContain) {
				t.Errorf("reason %q does not contain %q", v.Reason, c.reasonContain)
			}
			for _, secret := range []string{testCard, testGitHub, testIBAN, "4111 1111 1111 1111"} {
				if strings.Contains(v.Reason, secret) || strings.Contains(f.Excerpt, secret) || strings.Contains(f.Field, secret) {
					t.Errorf("the secret shows in reason %q / excerpt %q / field %q", v.Reason, f.Excerpt, f.Field)
				}
			}
		})
	}
}

// TestScanRequestKeepsBody checks that an allowed or blocked request's body reads as it came.
func TestScanRequestKeepsBody(t *testing.T) {
	s := newScanner(t, Config{})
	for _, body := range []string{`{"a":"hello"}`, `{"card":"` + testCard + `"}`} {
		r := post(t, "https://api.example.com/", "application/json", gz([]byte(body)))
		r.Header.Set("Content-Encoding", "gzip")
		if _, err := s.ScanRequest(r); err != nil {
			t.Fatal(err)
		}
		if got := readBody(t, r); !bytes.Equal(got, gz([]byte(body))) {
			t.Errorf("body changed for %s", body)
		}
	}
}

func redactAll() Config {
	a := DefaultActions()
	for k := range a {
		a[k] = ActionRedact
	}
	return Config{Actions: a}
}

// TestRedactRoundTrip checks that a redacted request is well-formed: the body decodes, parses
// and has the right length, and the matches are gone.
func TestRedactRoundTrip(t *testing.T) {
	s := newScanner(t, redactAll())
	t.Run("json with escapes and number", func(t *testing.T) {
		body := `{"msg":"line\nkey \u0067hp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2 \"q\"","card":` + testCard + `,"ok":true,"iban":"` + testIBAN + `"}`
		r := post(t, "https://api.example.com/", "application/json", []byte(body))
		v, err := s.ScanRequest(r)
		if err != nil || v.Action != ActionRedact {
			t.Fatalf("verdict %+v, %v", v, err)
		}
		got := readBody(t, r)
		var doc map[string]any
		if err := json.Unmarshal(got, &doc); err != nil {
			t.Fatalf("redacted body is not JSON: %v\n%s", err, got)
		}
		if doc["msg"] != "line\nkey [REDACTED:github-pat] \"q\"" || doc["card"] != "[REDACTED:payment-card]" ||
			doc["iban"] != "[REDACTED:iban]" || doc["ok"] != true {
			t.Errorf("redacted document %v", doc)
		}
		if r.ContentLength != int64(len(got)) || r.Header.Get("Content-Length") != strconv.Itoa(len(got)) {
			t.Errorf("length %d / %q, body %d", r.ContentLength, r.Header.Get("Content-Length"), len(got))
		}
	})
	t.Run("gzip form", func(t *testing.T) {
		form := "name=Jane+Doe&card=" + url.QueryEscape("4111-1111-1111-1111") + "&note=" + url.QueryEscape("mail jane@example.com")
		r := post(t, "https://shop.example.com/", "application/x-www-form-urlencoded", gz([]byte(form)))
		r.Header.Set("Content-Encoding", "gzip")
		r.TransferEncoding = []string{"chunked"}
		if v, err := s.ScanRequest(r); err != nil || v.Action != ActionRedact {
			t.Fatalf("verdict %+v, %v", v, err)
		}
		raw := readBody(t, r)
		if r.ContentLength != int64(len(raw)) || r.TransferEncoding != nil {
			t.Errorf("length %d for %d bytes, transfer encoding %v", r.ContentLength, len(raw), r.TransferEncoding)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		vals, err := url.ParseQuery(string(plain))
		if err != nil {
			t.Fatal(err)
		}
		if vals.Get("name") != "Jane Doe" || vals.Get("card") != "[REDACTED:payment-card]" || vals.Get("note") != "mail [REDACTED:email]" {
			t.Errorf("redacted form %v", vals)
		}
	})
	t.Run("multipart", func(t *testing.T) {
		body, ctype := multipartBody(t, [3]string{"a", "", "iban " + testIBAN}, [3]string{"f", "x.json", `{"k":"` + testCard + `"}`})
		r := post(t, "https://upload.example.com/", ctype, body)
		if v, err := s.ScanRequest(r); err != nil || v.Action != ActionRedact {
			t.Fatalf("verdict %+v, %v", v, err)
		}
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			t.Fatal(err)
		}
		if got := r.FormValue("a"); got != "iban [REDACTED:iban]" {
			t.Errorf("part a = %q", got)
		}
		fh := r.MultipartForm.File["f"][0]
		f, _ := fh.Open()
		content, _ := io.ReadAll(f)
		if fh.Filename != "x.json" || string(content) != `{"k":"[REDACTED:payment-card]"}` {
			t.Errorf("part f = %q %q", fh.Filename, content)
		}
	})
	t.Run("url, query and header", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "https://api.example.com/u/jane@example.com/x?iban="+testIBAN+"&b=2", nil)
		r.Header.Set("X-Card", "card "+testCard)
		if v, err := s.ScanRequest(r); err != nil || v.Action != ActionRedact {
			t.Fatalf("verdict %+v, %v", v, err)
		}
		if r.URL.Path != "/u/[REDACTED:email]/x" || r.URL.RawQuery != "iban=%5BREDACTED%3Aiban%5D&b=2" ||
			r.Header.Get("X-Card") != "card [REDACTED:payment-card]" {
			t.Errorf("rewritten to %q %q %q", r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Card"))
		}
		if r.RequestURI != r.URL.String() { // httptest gives the absolute form

			t.Errorf("RequestURI %q", r.RequestURI)
		}
	})
	t.Run("log findings are not redacted", func(t *testing.T) {
		s := newScanner(t, Config{Actions: map[string]Action{DetectorEmail: ActionLog, DetectorIBAN: ActionRedact}})
		r := post(t, "https://x.example.com/", "text/plain", []byte("a@example.com "+testIBAN))
		if v, _ := s.ScanRequest(r); v.Action != ActionRedact {
			t.Fatalf("verdict %v", v.Action)
		}
		if got := string(readBody(t, r)); got != "a@example.com [REDACTED:iban]" {
			t.Errorf("body %q", got)
		}
	})
	t.Run("block wins and nothing is rewritten", func(t *testing.T) {
		s := newScanner(t, Config{Actions: map[string]Action{DetectorSecret: ActionBlock, DetectorIBAN: ActionRedact}})
		body := testIBAN + " " + testGitHub
		r := post(t, "https://x.example.com/?iban="+testIBAN, "text/plain", []byte(body))
		v, _ := s.ScanRequest(r)
		if v.Action != ActionBlock || !strings.HasPrefix(v.Reason, "blocked: a GitHub personal access token in the body") {
			t.Fatalf("verdict %v %q", v.Action, v.Reason)
		}
		if got := string(readBody(t, r)); got != body || r.URL.RawQuery != "iban="+testIBAN {
			t.Errorf("request rewritten: %q %q", got, r.URL.RawQuery)
		}
	})
	t.Run("host cannot be redacted", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "https://"+testCard+".attacker.example/", nil)
		v, _ := s.ScanRequest(r)
		if v.Action != ActionBlock || !strings.Contains(v.Reason, "cannot be redacted there") {
			t.Fatalf("verdict %v %q", v.Action, v.Reason)
		}
	})
}

func TestOversize(t *testing.T) {
	big := []byte(strings.Repeat("x", 2000) + " " + testGitHub + " " + strings.Repeat("y", 2000) + " " + testIBAN)
	cases := []struct {
		name     string
		policy   OversizePolicy
		encoding string
		body     []byte
		action   Action
		findings int
	}{
		{"block", OversizeBlock, "", big, ActionBlock, 0},
		{"allow unscanned", OversizeAllowUnscanned, "", big, ActionAllow, 0},
		{"scan prefix finds what is in it", OversizeScanPrefix, "", big, ActionBlock, 1},
		{"gzip bomb blocks", OversizeBlock, "gzip", gz(bytes.Repeat([]byte("z"), 1<<20)), ActionBlock, 0},
		{"scan prefix of gzip", OversizeScanPrefix, "gzip", gz(big), ActionBlock, 1},
		{"unknown encoding blocks", OversizeBlock, "br", []byte("abc"), ActionBlock, 0},
		{"unknown encoding allowed", OversizeAllowUnscanned, "br", []byte("abc"), ActionAllow, 0},
		{"corrupt gzip blocks", OversizeBlock, "gzip", []byte("not gzip"), ActionBlock, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScanner(t, Config{MaxBodyBytes: 3000, Oversize: c.policy})
			r := post(t, "https://x.example.com/", "text/plain", c.body)
			if c.encoding != "" {
				r.Header.Set("Content-Encoding", c.encoding)
			}
			v, err := s.ScanRequest(r)
			if err != nil {
				t.Fatal(err)
			}
			if v.Action != c.action || len(v.Findings) != c.findings || v.Unscanned == "" {
				t.Fatalf("verdict %v with %d findings, unscanned %q; want %v with %d", v.Action, len(v.Findings), v.Unscanned, c.action, c.findings)
			}
			if v.Action == ActionBlock && v.Reason == "" {
				t.Error("no reason")
			}
			if got := readBody(t, r); !bytes.Equal(got, c.body) {
				t.Errorf("body not passed on whole: %d bytes of %d", len(got), len(c.body))
			}
		})
	}
}

func TestScanContentAndBytes(t *testing.T) {
	s := newScanner(t, Config{Actions: map[string]Action{DetectorPaymentCard: ActionRedact}})
	v, red := s.ScanContent("mcp:tool_call", "application/json", []byte(`{"args":{"card":"`+testCard+`"}}`))
	if v.Action != ActionRedact || v.Findings[0].Where != "mcp:tool_call" || v.Findings[0].Field != "$.args.card" ||
		string(red) != `{"args":{"card":"[REDACTED:payment-card]"}}` {
		t.Errorf("verdict %+v, redacted %s", v, red)
	}
	v = s.ScanBytes("stdin", []byte("pay "+testCard))
	if v.Action != ActionRedact || v.Findings[0].Excerpt != "pay [REDACTED:payment-card]" || v.Findings[0].Offset != 4 {
		t.Errorf("verdict %+v", v)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"unknown detector":   {Actions: map[string]Action{"credit-card": ActionBlock}},
		"unknown action":     {Actions: map[string]Action{DetectorEmail: "drop"}},
		"rule on non-secret": {Actions: map[string]Action{"email:x": ActionBlock}},
		"bad custom regex":   {Custom: []CustomDetector{{Name: "x", Pattern: "(", Action: ActionLog}}},
		"bad custom name":    {Custom: []CustomDetector{{Name: "a b", Pattern: "x", Action: ActionLog}}},
		"custom allow":       {Custom: []CustomDetector{{Name: "x", Pattern: "x", Action: ActionAllow}}},
		"duplicate custom":   {Custom: []CustomDetector{{Name: "x", Pattern: "x", Action: ActionLog}, {Name: "x", Pattern: "y", Action: ActionLog}}},
		"oversize policy":    {Oversize: "drop"},
		"negative max":       {MaxBodyBytes: -1},
		"phone region":       {PhoneRegion: "XX"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSecretRuleActions(t *testing.T) {
	s := newScanner(t, Config{Actions: map[string]Action{DetectorSecret: ActionBlock, "secret:github-pat": ActionLog}})
	v := s.ScanBytes("x", []byte(testGitHub+" AKIA5BQZ7XK4LMNR2TUV"))
	if len(v.Findings) != 2 || v.Findings[0].Action != ActionLog || v.Findings[1].Action != ActionBlock {
		t.Errorf("findings %+v", v.Findings)
	}
	s = newScanner(t, Config{Actions: map[string]Action{"secret:github-pat": ActionBlock}})
	if v := s.ScanBytes("x", []byte(testGitHub+" AKIA5BQZ7XK4LMNR2TUV")); len(v.Findings) != 1 {
		t.Errorf("only github-pat enabled, findings %+v", v.Findings)
	}
}

// TestConcurrentScans runs large scans (the concurrent path) from several goroutines; run with
// -race.
func TestConcurrentScans(t *testing.T) {
	s := newScanner(t, Config{})
	body := BenchBody(parallelMin + 100_000)
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			r := post(t, "https://api.example.com/", "application/json", body)
			v, err := s.ScanRequest(r)
			if err == nil && (v.Action != ActionBlock || len(v.Findings) == 0) {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkBudget checks that texts built to be slow are cut short and handled like an oversize
// body, quickly.
func TestWorkBudget(t *testing.T) {
	var secrets, phones strings.Builder
	for i := 0; secrets.Len() < 1<<20; i++ {
		secrets.WriteString("api_key=" + strconv.FormatUint(uint64(i)*0x9E3779B97F4A7C15, 36) + "Q7x" + strconv.Itoa(i) + "Zk\n")
	}
	for phones.Len() < 1<<20 {
		phones.WriteString("+1 234-567-8901 ") // parses, not valid
	}
	cases := []struct {
		name, body string
	}{
		{"dense secrets", secrets.String()},
		{"many findings", strings.Repeat(testCard+" ", 100000)},
		{"phone candidates", phones.String()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, policy := range []OversizePolicy{OversizeBlock, OversizeAllowUnscanned} {
				s := newScanner(t, Config{Oversize: policy, Actions: map[string]Action{
					DetectorSecret: ActionRedact, DetectorPaymentCard: ActionRedact, DetectorPhone: ActionLog}})
				r := post(t, "https://x.example.com/", "text/plain", []byte(c.body))
				v, err := s.ScanRequest(r)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(v.Unscanned, "was not scanned whole") {
					t.Errorf("%s: unscanned %q", policy, v.Unscanned)
				}
				if policy == OversizeBlock && (v.Action != ActionBlock || !strings.Contains(v.Reason, "not scanned whole")) {
					t.Errorf("%s: verdict %v %q", policy, v.Action, v.Reason)
				}
				if policy == OversizeAllowUnscanned && v.Action == ActionRedact {
					t.Errorf("%s: a body not scanned whole was redacted", policy)
				}
			}
		})
	}
}

func TestBodyVariants(t *testing.T) {
	s := newScanner(t, redactAll())
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, flate.BestSpeed)
	fw.Write([]byte(`{"iban":"` + testIBAN + `"}`))
	fw.Close()
	cases := []struct {
		name, ctype, encoding string
		body                  []byte
		field, redacted       string
	}{
		{"raw deflate", "application/json", "deflate", raw.Bytes(), "$.iban", `{"iban":"[REDACTED:iban]"}`},
		{"ndjson", "application/x-ndjson", "", []byte("{\"a\":1}\n{\"b\":\"" + testIBAN + "\"}\n"), "$.b", "{\"a\":1}\n{\"b\":\"[REDACTED:iban]\"}\n"},
		{"unfinished json keeps its path", "application/json", "", []byte(`{"a": "` + testIBAN + `"`), "$.a", `{"a": "[REDACTED:iban]"`},
		{"unbalanced json redacted as text", "application/json", "", []byte(`]{"a": "` + testIBAN + `"}`), "", `]{"a": "[REDACTED:iban]"}`},
		{"json in +json type", "application/vnd.api+json", "", []byte(`[{"x":"` + testIBAN + `"}]`), "$[0].x", `[{"x":"[REDACTED:iban]"}]`},
		{"gzip then deflate", "text/plain", "deflate, gzip", gz(zl([]byte("iban " + testIBAN))), "", "iban [REDACTED:iban]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, "https://x.example.com/", c.ctype, c.body)
			if c.encoding != "" {
				r.Header.Set("Content-Encoding", c.encoding)
			}
			v, err := s.ScanRequest(r)
			if err != nil || v.Action != ActionRedact || len(v.Findings) != 1 || v.Findings[0].Field != c.field {
				t.Fatalf("verdict %+v, %v", v, err)
			}
			got, err := decodeBody(readBody(t, r), contentEncodings(c.encoding), 1<<20)
			if err != nil || string(got) != c.redacted {
				t.Errorf("redacted body %q (%v), want %q", got, err, c.redacted)
			}
		})
	}
}
