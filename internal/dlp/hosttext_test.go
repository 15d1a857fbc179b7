package dlp

import (
	"strings"
	"testing"
)

func TestScanHost(t *testing.T) {
	s := newScanner(t, Config{})
	key := "AKIA" + fakeToken(301, upnum, 16)
	for host, want := range map[string]Action{
		"api.example.com": ActionAllow,
		"3fa85f64-5717-4562-b3fc-2c963f66afa6.cdn.example.net": ActionAllow,
		"d41d8cd98f00b204e9800998ecf8427e.example.org:8443":    ActionAllow,
		strings.ToLower(key) + ".attacker.example":             ActionAllow, // a host is lower case: no key shape
		toHex(key) + ".attacker.example":                       ActionBlock,
		"4111111111111111.attacker.example":                    ActionBlock,
	} {
		v := s.ScanHost(host)
		if v.Action != want {
			t.Errorf("%s: %v %q", host, v.Action, v.Reason)
		}
		if want == ActionBlock && (v.Findings[0].Where != "host" || !strings.Contains(v.Reason, "in the host name")) {
			t.Errorf("%s: %+v", host, v.Findings)
		}
	}
	// A redact action blocks in a host name.
	r := newScanner(t, Config{Actions: map[string]Action{DetectorPaymentCard: ActionRedact}})
	if v := r.ScanHost("4111111111111111.x.example"); v.Action != ActionBlock {
		t.Errorf("redact in a host: %v", v.Action)
	}
}

func TestRedactText(t *testing.T) {
	all := DefaultActions()
	for k := range all {
		all[k] = ActionRedact
	}
	s := newScanner(t, Config{Actions: all})
	key := "AKIA" + fakeToken(302, upnum, 16)
	in := "GET https://x.example/?k=" + toB64("id="+key) + " from jane@example.com card 4111 1111 1111 1111"
	out, v := s.RedactText("record", []byte(in))
	got := string(out)
	if strings.Contains(got, key) || strings.Contains(got, toB64("id="+key)) || strings.Contains(got, "jane@example.com") ||
		strings.Contains(got, "4111") || len(v.Findings) != 3 {
		t.Errorf("redacted %q, findings %+v", got, v.Findings)
	}
	if !strings.Contains(got, "k=[REDACTED:aws-access-token] from [REDACTED:email] card [REDACTED:payment-card]") {
		t.Errorf("redacted %q", got)
	}
	// Log actions are taken out too; nothing found, nothing changed.
	logOnly := newScanner(t, Config{Actions: map[string]Action{DetectorEmail: ActionLog}})
	if out, _ := logOnly.RedactText("r", []byte("to a@example.com")); string(out) != "to [REDACTED:email]" {
		t.Errorf("log action: %q", out)
	}
	if out, v := logOnly.RedactText("r", []byte("nothing here")); string(out) != "nothing here" || len(v.Findings) != 0 {
		t.Errorf("clean text: %q %+v", out, v)
	}
}

func TestEntropyAndLabels(t *testing.T) {
	if e := Entropy([]byte("aaaaaaaa")); e != 0 {
		t.Errorf("constant: %v", e)
	}
	if e := Entropy([]byte(fakeToken(303, alnum, 64))); e < 5 {
		t.Errorf("random alphanumerics: %v", e)
	}
	if e := Entropy([]byte("password")); e > 3 {
		t.Errorf("word: %v", e)
	}
	for host, want := range map[string]string{
		"a.b.example.com": "a b example com", "x.example.org:8443": "x example org", "example.com.": "example com",
		"[::1]:80": "::1", "": "",
	} {
		if got := strings.Join(HostLabels(host), " "); got != want {
			t.Errorf("HostLabels(%q) = %q, want %q", host, got, want)
		}
	}
}
