package e2b_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// sign signs a /files URL as the SDK's downloadUrl and uploadUrl do.
func sign(path, op, user, token string, exp int64) url.Values {
	raw := path + ":" + op + ":" + user + ":" + token
	q := url.Values{"path": {path}}
	if exp != 0 {
		raw += ":" + strconv.FormatInt(exp, 10)
		q.Set("signature_expiration", strconv.FormatInt(exp, 10))
	}
	sum := sha256.Sum256([]byte(raw))
	q.Set("signature", "v1_"+strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "="))
	return q
}

// A signed /files URL (sbx.downloadUrl, sbx.uploadUrl) is served without headers, as the key that
// made the sandbox; another path, operation, sandbox or an expired one is refused.
func TestSignedFileURL(t *testing.T) {
	f := newFixture(t)
	sb := f.create(f.keyA, map[string]any{"templateID": "base"})
	other := f.create(f.keyA, map[string]any{"templateID": "base"})
	host := "49983-" + sb.SandboxID + ".e2b.test"
	now := (*f.now.Load()).Unix()

	resp, b := f.do("GET", host, "/files?"+sign("a.txt", "read", "", sb.EnvdAccessToken, 0).Encode(), nil, nil)
	wantStatus(t, "signed read", resp, b, 200)
	if got := f.target.Load(); got == nil || got.SessionID != "sb_"+sb.SandboxID[2:] || got.Identity.Caller.Tenant != "acme" {
		t.Fatalf("the service ran for %+v", got)
	}
	resp, b = f.do("GET", host, "/files?"+sign("a.txt", "read", "", sb.EnvdAccessToken, now+60).Encode(), nil, nil)
	wantStatus(t, "signed read with an expiration", resp, b, 200)

	for what, q := range map[string]url.Values{
		"expired":             sign("a.txt", "read", "", sb.EnvdAccessToken, now-1),
		"another sandbox's":   sign("a.txt", "read", "", other.EnvdAccessToken, 0),
		"the write signature": sign("a.txt", "write", "", sb.EnvdAccessToken, 0),
	} {
		resp, b := f.do("GET", host, "/files?"+q.Encode(), nil, nil)
		wantStatus(t, what, resp, b, 401)
	}
	q := sign("a.txt", "read", "", sb.EnvdAccessToken, 0)
	q.Set("path", "b.txt")
	resp, b = f.do("GET", host, "/files?"+q.Encode(), nil, nil)
	wantStatus(t, "another path", resp, b, 401)
	resp, b = f.do("POST", host, "/files?"+sign("a.txt", "write", "", sb.EnvdAccessToken, 0).Encode(), nil, nil)
	wantStatus(t, "signed write", resp, b, 200)
	resp, b = f.do("GET", host, "/health?"+sign("a.txt", "read", "", sb.EnvdAccessToken, 0).Encode(), nil, nil)
	wantStatus(t, "a signature elsewhere than /files", resp, b, 401)
}
