package dlp

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// benignRequests builds the benign traffic set of issue 13: what an agent sends when it does its
// work (API calls with ids, UUIDs and hashes, images in base64, package downloads, OAuth flows
// without secrets, chat completions, telemetry). None of it may be blocked or rewritten under
// the default policy.
func benignRequests(t *testing.T) map[string]*http.Request {
	rng := rand.New(rand.NewPCG(2024, 13))
	hexN := func(n int) string { return fakeToken(rng.Uint64(), hexlow, n) }
	uuid := func() string {
		h := hexN(32)
		return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
	}
	sum := func(s string) (string, string, string) {
		a, b, c := sha1.Sum([]byte(s)), sha256.Sum256([]byte(s)), sha512.Sum512([]byte(s))
		return hex.EncodeToString(a[:]), hex.EncodeToString(b[:]), base64.StdEncoding.EncodeToString(c[:])
	}
	get := func(u string, hdr ...string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, u, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	body := func(method, u, ctype, b string, hdr ...string) *http.Request {
		r := httptest.NewRequest(method, u, strings.NewReader(b))
		r.Header.Set("Content-Type", ctype)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	pngB64, jpgB64 := testImages(t)
	sha1a, sha256a, sha512a := sum("requests-2.32.3")
	commit := hexN(40)
	reqs := map[string]*http.Request{
		// API calls with ids.
		"rest ids":           get("https://api.example.com/v1/users/12345/orders/987654321?page=2&limit=50&sort=-created_at"),
		"uuid path":          get("https://api.example.com/v2/projects/" + uuid() + "/tasks/" + uuid()),
		"ulid and snowflake": get("https://api.example.com/v1/messages/01HZX3K9Q8YV5T2R7N4M6P0B1C?after=1234567890123456789"),
		"mongo object id":    get("https://api.example.com/items/65f1c2a9e4b0d3a1b2c3d4e5"),
		"stripe object ids":  get("https://api.stripe.com/v1/customers/cus_NffrFeUfNV2Hib/payment_methods?type=card&limit=3"),
		"github api":         get("https://api.github.com/repos/agentbox-dev/agentbox/commits/"+commit+"/status", "Accept", "application/vnd.github+json", "X-GitHub-Api-Version", "2022-11-28"),
		"github compare":     get("https://api.github.com/repos/golang/go/compare/" + hexN(40) + "..." + hexN(40)),
		"github contents":    get("https://api.github.com/repos/o/r/contents/src/main.go?ref=" + hexN(40)),
		"etag":               get("https://cdn.example.com/app.js", "If-None-Match", `W/"`+hexN(32)+`"`, "If-Modified-Since", time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).Format(http.TimeFormat)),
		"traceparent":        get("https://api.example.com/health", "Traceparent", "00-"+hexN(32)+"-"+hexN(16)+"-01", "X-Request-Id", uuid(), "X-Amzn-Trace-Id", "Root=1-"+hexN(8)+"-"+hexN(24)),
		"search query":       get("https://www.googleapis.com/customsearch/v1?q=" + url.QueryEscape("how to rotate an api key safely in kubernetes") + "&num=10&start=11"),
		"weather":            get("https://api.open-meteo.com/v1/forecast?latitude=52.52&longitude=13.41&hourly=temperature_2m&timezone=Europe%2FBerlin"),
		"encoded redirect":   get("https://app.example.com/login?next=%2Fdashboard%3Ftab%3Dbilling%26range%3D30d"),
		"double encoded":     get("https://app.example.com/r?u=https%253A%252F%252Fdocs.example.com%252Fguide%253Fv%253D2"),
		"hash query":         get("https://api.example.com/v1/files?sha256=" + sha256a + "&sha1=" + sha1a),
		"base64 cursor":      get("https://api.example.com/v1/events?cursor=" + base64.URLEncoding.EncodeToString([]byte(`{"ts":1717171717,"id":"evt_9f8e7d"}`))),
		"base64 filter":      get("https://api.example.com/v1/search?f=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(`status:open AND label:"bug" AND updated:>2024-01-01`)))),
		"docker manifest":    get("https://registry-1.docker.io/v2/library/python/manifests/3.12-slim", "Accept", "application/vnd.oci.image.index.v1+json"),
		"docker blob":        get("https://registry-1.docker.io/v2/library/python/blobs/sha256:" + sha256a),
		"s3 public object":   get("https://my-public-bucket.s3.amazonaws.com/datasets/2024/q2/part-00017.parquet"),
		"block explorer":     get("https://api.etherscan.io/api?module=account&action=balance&address=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed&tag=latest"),

		// Package downloads.
		"pip simple":   get("https://pypi.org/simple/requests/", "Accept", "application/vnd.pypi.simple.v1+json", "User-Agent", "pip/24.0 {\"ci\":null,\"cpu\":\"x86_64\"}"),
		"pip wheel":    get("https://files.pythonhosted.org/packages/f9/9b/" + hexN(60) + "/requests-2.32.3-py3-none-any.whl#sha256=" + sha256a),
		"npm metadata": get("https://registry.npmjs.org/express", "Accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8", "Npm-Session", hexN(16), "Npm-Command", "install"),
		"npm tarball":  get("https://registry.npmjs.org/express/-/express-4.19.2.tgz"),
		"npm lockfile": body("POST", "https://registry.npmjs.org/-/npm/v1/security/advisories/bulk", "application/json",
			`{"express":["4.19.2"],"body-parser":["1.20.2"],"integrity":"sha512-`+sha512a+`"}`),
		"go module":   get("https://proxy.golang.org/github.com/zricethezav/gitleaks/v8/@v/v8.30.1.zip"),
		"go sum":      body("POST", "https://sum.golang.org/lookup", "text/plain", "github.com/spf13/viper v1.19.0 h1:"+base64.StdEncoding.EncodeToString(sha256Bytes("viper"))+"\ngithub.com/spf13/viper v1.19.0/go.mod h1:"+base64.StdEncoding.EncodeToString(sha256Bytes("viper.mod"))+"\n"),
		"apt package": get("https://deb.debian.org/debian/pool/main/c/curl/curl_7.88.1-10+deb12u5_amd64.deb"),
		"cargo crate": get("https://static.crates.io/crates/serde/serde-1.0.203.crate"),
		"maven":       get("https://repo1.maven.org/maven2/org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar.sha1"),
		"conda":       get("https://conda.anaconda.org/conda-forge/linux-64/repodata.json", "Accept-Encoding", "gzip, deflate, br"),

		// OAuth flows without secrets.
		"oauth authorize": get("https://accounts.google.com/o/oauth2/v2/auth?response_type=code&client_id=1234567890-abc123def456.apps.googleusercontent.com&redirect_uri=" +
			url.QueryEscape("https://app.example.com/oauth/callback") + "&scope=" + url.QueryEscape("openid email profile") + "&state=" + fakeToken(rng.Uint64(), urlb64, 32) +
			"&code_challenge=" + base64.RawURLEncoding.EncodeToString(sha256Bytes("verifier")) + "&code_challenge_method=S256&nonce=" + hexN(16)),
		"oidc discovery": get("https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration"),
		"jwks":           get("https://www.googleapis.com/oauth2/v3/certs"),
		"device flow":    body("POST", "https://github.com/login/device/code", "application/x-www-form-urlencoded", "client_id=Iv1.8a61f9b3a7aba766&scope=repo%20read%3Aorg"),
		"callback":       get("https://app.example.com/oauth/callback?state=" + fakeToken(rng.Uint64(), urlb64, 32) + "&iss=" + url.QueryEscape("https://accounts.google.com")),

		// Chat completions and tool calls.
		"chat completion": body("POST", "https://api.openai.com/v1/chat/completions", "application/json", chatBody(rng)),
		"anthropic messages": body("POST", "https://api.anthropic.com/v1/messages", "application/json",
			`{"model":"claude-sonnet-4","max_tokens":1024,"messages":[{"role":"user","content":"Summarise the password reset flow: the user asks for a reset token, we email a link, the token expires in 30 minutes and the API key of the mail service is read from the vault."}]}`,
			"Anthropic-Version", "2023-06-01"),
		"vision png":  body("POST", "https://api.openai.com/v1/chat/completions", "application/json", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,`+pngB64+`"}}]}]}`),
		"vision jpeg": body("POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-pro:generateContent", "application/json", `{"contents":[{"parts":[{"text":"Describe"},{"inline_data":{"mime_type":"image/jpeg","data":"`+jpgB64+`"}}]}]}`),
		"tool call args": body("POST", "https://api.example.com/tools/run", "application/json",
			`{"tool":"git","args":{"cmd":"log","range":"`+hexN(40)+`..HEAD","format":"%H %an %s"},"call_id":"call_`+fakeToken(rng.Uint64(), alnum, 24)+`"}`),
		"code review comment": body("POST", "https://api.github.com/repos/o/r/pulls/42/comments", "application/json",
			`{"body":"Nit: rename `+"`apiKeyProvider`"+` to `+"`credentialSource`"+`; the token is read from the environment, see config.go line 88.","commit_id":"`+commit+`","path":"internal/config.go","line":88}`),
		"markdown with code": body("POST", "https://paste.example.com/api", "application/json", jsonQuote(
			"```python\nimport base64, hashlib\ndigest = hashlib.sha256(data).hexdigest()\nprint(base64.b64encode(digest.encode()))\n```\nThe function returns "+sha256a)),
		"telemetry": body("POST", "https://otel.example.com/v1/traces", "application/json",
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"`+hexN(32)+`","spanId":"`+hexN(16)+`","name":"GET /api/v2/orders","startTimeUnixNano":"1717171717000000000","endTimeUnixNano":"1717171717250000000","attributes":[{"key":"http.status_code","value":{"intValue":"200"}}]}]}]}]}`),
		"log upload": body("POST", "https://logs.example.com/ingest", "text/plain", logLines(rng, uuid)),
		"csv upload": body("POST", "https://data.example.com/upload", "text/csv", "id,sku,price,updated\n"+csvRows(rng, uuid)),
		"graphql": body("POST", "https://api.example.com/graphql", "application/json",
			`{"query":"query($id: ID!) { node(id: $id) { ... on Repository { name stargazerCount } } }","variables":{"id":"MDEwOlJlcG9zaXRvcnkxMjk2MjY5"}}`),
		"form search":  body("POST", "https://shop.example.com/search", "application/x-www-form-urlencoded", "q=blue+cotton+shirt&size=L&sort=price_asc&session_id="+uuid()),
		"webhook test": body("POST", "https://hooks.example.com/ci", "application/json", `{"event":"push","ref":"refs/heads/main","before":"`+hexN(40)+`","after":"`+commit+`","repository":{"full_name":"o/r"}}`),
		"quoted printable email": body("POST", "https://mail.example.com/send", "message/rfc822",
			"Subject: =?UTF-8?Q?Caf=C3=A9_menu?=\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nThe caf=C3=A9 opens at 9=3D00, see you there. Long line that goes on and on and is wrapp=\r\ned by the encoder.\r\n"),
	}
	for i := 0; i < 40; i++ { // more ids, hashes and prose, generated
		id := fmt.Sprintf("generated %02d", i)
		switch i % 4 {
		case 0:
			reqs[id] = get(fmt.Sprintf("https://api.example.com/v1/orders/%d/items/%s?etag=%s", rng.IntN(1e9), uuid(), hexN(64)))
		case 1:
			reqs[id] = body("POST", "https://api.example.com/v1/events", "application/json",
				fmt.Sprintf(`{"id":"%s","sha1":"%s","ts":%d,"note":%s}`, uuid(), hexN(40), 1700000000+rng.IntN(1e7), jsonQuote(benchProse(rng, 40))))
		case 2:
			reqs[id] = get("https://cdn.example.com/assets/"+hexN(20)+"/bundle."+hexN(8)+".js", "Accept", "*/*", "Referer", "https://app.example.com/p/"+uuid())
		case 3:
			reqs[id] = body("PUT", "https://storage.example.com/b/"+uuid(), "application/octet-stream", string(pngLike(rng, 4096)))
		}
	}
	return reqs
}

// TestBenignTraffic: the benign set passes the default policy: nothing blocked, nothing
// rewritten. Logged findings (e-mail addresses, phone numbers, addresses) are counted.
func TestBenignTraffic(t *testing.T) {
	s := newScanner(t, Config{})
	reqs := benignRequests(t)
	blocking, logged := 0, 0
	for name, r := range reqs {
		v, err := s.ScanRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range v.Findings {
			if f.Action == ActionBlock || f.Action == ActionRedact {
				blocking++
				t.Errorf("%s: %s/%s (%s) at %s %s, excerpt %q", name, f.Detector, f.Rule, f.Encoding, f.Where, f.Field, f.Excerpt)
			} else {
				logged++
				t.Logf("%s: logged %s/%s at %s", name, f.Detector, f.Rule, f.Where)
			}
		}
		if v.Action == ActionBlock || v.Action == ActionRedact || v.Unscanned != "" {
			t.Errorf("%s: %v %q %q", name, v.Action, v.Reason, v.Unscanned)
		}
	}
	t.Logf("benign set: %d requests, %d blocking or redacting findings (false positives), %d logged findings", len(reqs), blocking, logged)
}

func sha256Bytes(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func jsonQuote(s string) string {
	b, _ := jsonMarshal(s)
	return string(b)
}

// testImages returns a PNG and a JPEG (a 96x64 gradient with noise) in base64.
func testImages(t *testing.T) (string, string) {
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	rng := rand.New(rand.NewPCG(7, 7))
	for y := 0; y < 64; y++ {
		for x := 0; x < 96; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 2), uint8(y * 3), uint8(rng.IntN(256)), 255})
		}
	}
	var p, j bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(p.Bytes()), base64.StdEncoding.EncodeToString(j.Bytes())
}

func chatBody(rng *rand.Rand) string {
	var msgs []string
	for i := 0; i < 8; i++ {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, `{"role":"`+role+`","content":`+jsonQuote(benchProse(rng, 60))+`}`)
	}
	return `{"model":"gpt-4o","temperature":0.2,"messages":[` + strings.Join(msgs, ",") + `]}`
}

func logLines(rng *rand.Rand, uuid func() string) string {
	var b strings.Builder
	ts := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 60; i++ {
		ts = ts.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		fmt.Fprintf(&b, "%s INFO req=%s ip=10.%d.%d.%d path=/api/v2/orders/%d status=%d dur=%dms\n",
			ts.Format(time.RFC3339Nano), uuid()[:13], rng.IntN(256), rng.IntN(256), rng.IntN(256), rng.IntN(1e6),
			[]int{200, 201, 404, 500}[rng.IntN(4)], rng.IntN(900))
	}
	return b.String()
}

func csvRows(rng *rand.Rand, uuid func() string) string {
	var b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "%s,SKU-%05d-XL,%d.%02d,2024-06-%02dT10:00:00Z\n", uuid(), rng.IntN(1e5), rng.IntN(500), rng.IntN(100), 1+rng.IntN(28))
	}
	return b.String()
}
