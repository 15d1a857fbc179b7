package dlp

import (
	"strings"
	"testing"
)

// detectorCase is one example for a detector: text, and want, the part of text that must be
// found (empty: nothing may be found).
type detectorCase struct {
	name, text, want string
}

// runDetectorCases scans each case's text with only the given detector enabled.
func runDetectorCases(t *testing.T, cfg Config, detector string, cases []detectorCase) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pos, neg := 0, 0
	for _, c := range cases {
		if c.want == "" {
			neg++
		} else {
			pos++
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := s.ScanBytes("test", []byte(c.text))
			var got []string
			for _, f := range v.Findings {
				if f.Detector != detector {
					t.Errorf("finding from %s/%s, want only %s", f.Detector, f.Rule, detector)
				}
				got = append(got, c.text[f.Offset:f.Offset+f.Length])
				if c.want != "" && strings.Contains(f.Excerpt, c.want) {
					t.Errorf("excerpt %q shows the match", f.Excerpt)
				}
			}
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("found %q in %q, want nothing", got, c.text)
			case c.want != "" && (len(got) != 1 || got[0] != c.want):
				t.Errorf("found %q in %q, want [%q]", got, c.text, c.want)
			}
		})
	}
	if pos < 10 || neg < 10 {
		t.Errorf("%d positive and %d negative examples, want at least 10 of each", pos, neg)
	}
	t.Logf("%s: %d positive and %d negative examples", detector, pos, neg)
}

func only(detector string) Config {
	return Config{Actions: map[string]Action{detector: ActionLog}}
}

func TestPaymentCards(t *testing.T) {
	runDetectorCases(t, only(DetectorPaymentCard), DetectorPaymentCard, []detectorCase{
		// Test numbers published by the brands and payment processors.
		{"visa", "card 4111111111111111 ok", "4111111111111111"},
		{"visa 13 digits", "4222222222222", "4222222222222"},
		{"visa spaced", `"card":"4111 1111 1111 1111"`, "4111 1111 1111 1111"},
		{"visa dashed", "pay with 4012-8888-8888-1881 now", "4012-8888-8888-1881"},
		{"mastercard", "5555555555554444", "5555555555554444"},
		{"mastercard 2-series", "no. 2223003122003222.", "2223003122003222"},
		{"amex", "378282246310005", "378282246310005"},
		{"amex grouped 4-6-5", "amex 3782 822463 10005 exp", "3782 822463 10005"},
		{"discover", "6011111111111117", "6011111111111117"},
		{"jcb", "3530111333300000", "3530111333300000"},
		{"diners 14 digits", "30569309025904", "30569309025904"},
		{"diners grouped 4-6-4", "3056 930902 5904", "3056 930902 5904"},
		{"unionpay 19 digits", "6205500000000000004", "6205500000000000004"},
		{"maestro", "6759649826438453", "6759649826438453"},
		{"json number", `{"card_number":5105105105105100}`, "5105105105105100"},
		{"with cvv group after", "4111 1111 1111 1111 123", "4111 1111 1111 1111"},

		{"luhn fails", "4111111111111112", ""},
		{"no brand", "1234567890123452", ""},
		{"all zeros", "0000000000000000", ""},
		{"millisecond timestamp", `"ts":1700000000000`, ""},
		{"nanosecond timestamp", "1700000000000000000", ""},
		{"inside a longer run", "41111111111111110", ""},
		{"twenty digits", "44111111111111111111", ""},
		{"glued to letters", "id_4111111111111111", ""},
		{"glued after", "4111111111111111abc", ""},
		{"decimal fraction", "0.4111111111111111", ""},
		{"mixed separators", "4111-1111 1111-1111", ""},
		{"odd grouping", "41111 11111 111111", ""},
		{"uuid", "3fa85f64-5717-4562-b3fc-2c963f66afa6", ""},
		{"order id failing luhn", "order 4000123412341235", ""},
		{"mastercard wrong length", "55555555555544443", ""},
	})
}

func TestUSSSN(t *testing.T) {
	runDetectorCases(t, only(DetectorUSSSN), DetectorUSSSN, []detectorCase{
		{"dashed", "SSN 536-22-1234 on file", "536-22-1234"},
		{"spaced", "536 22 1234", "536 22 1234"},
		{"famous example", "123-45-6789", "123-45-6789"},
		{"bare with ssn", "ssn: 536221234", "536221234"},
		{"bare with SSN=", "SSN=536221234", "536221234"},
		{"bare with social security", "Social Security number 123456789.", "123456789"},
		{"json field", `{"social_security":"536221234"}`, "536221234"},
		{"lowest", "001-01-0001", "001-01-0001"},
		{"highest area", "899-99-9999", "899-99-9999"},
		{"around 666", "665-12-3456 and", "665-12-3456"},
		{"667", "667-12-3456", "667-12-3456"},

		{"area 000", "000-12-3456", ""},
		{"area 666", "666-12-3456", ""},
		{"area 9xx", "900-12-3456", ""},
		{"group 00", "123-00-4567", ""},
		{"serial 0000", "123-45-0000", ""},
		{"bare without context", "invoice 536221234", ""},
		{"longer chain", "536-22-1234-5", ""},
		{"wrong layout", "536-221-234", ""},
		{"woolworth", "078-05-1120", ""},
		{"mixed separators", "536-22 1234", ""},
		{"glued digit", "1536-22-1234", ""},
		{"phone layout", "415-555-2671", ""},
	})
}

func TestIBAN(t *testing.T) {
	runDetectorCases(t, only(DetectorIBAN), DetectorIBAN, []detectorCase{
		{"de", "IBAN DE89370400440532013000", "DE89370400440532013000"},
		{"de print form", "DE89 3704 0044 0532 0130 00 is mine", "DE89 3704 0044 0532 0130 00"},
		{"gb", `"iban":"GB82WEST12345698765432"`, "GB82WEST12345698765432"},
		{"gb print form", "GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 32"},
		{"fr", "FR1420041010050500013M02606", "FR1420041010050500013M02606"},
		{"nl", "NL91ABNA0417164300.", "NL91ABNA0417164300"},
		{"be", "BE68539007547034", "BE68539007547034"},
		{"ch", "CH9300762011623852957", "CH9300762011623852957"},
		{"es", "ES9121000418450200051332", "ES9121000418450200051332"},
		{"it", "IT60X0542811101000000123456", "IT60X0542811101000000123456"},
		{"no", "NO9386011117947", "NO9386011117947"},
		{"at", "pay to AT611904300234573201", "AT611904300234573201"},

		{"bad check digits", "DE89370400440532013001", ""},
		{"bad check digits gb", "GB00WEST12345698765432", ""},
		{"unknown country", "XX89370400440532013000", ""},
		{"too short", "DE8937040044053201300", ""},
		{"too short gb", "GB82WEST1234569876543", ""},
		{"lowercase", "de89370400440532013000", ""},
		{"glued left", "ADE89370400440532013000", ""},
		{"glued right", "DE89370400440532013000X", ""},
		{"us has no iban", "US12345678901234567890", ""},
		{"sku", "SKU-DE89-3704", ""},
		{"broken print form", "DE89 3704 0044 0532 013 000", ""},
	})
}

func TestEmail(t *testing.T) {
	runDetectorCases(t, only(DetectorEmail), DetectorEmail, []detectorCase{
		{"simple", "write to jane.doe@example.com today", "jane.doe@example.com"},
		{"plus tag and subdomain", "j+tag@mail.example.co.uk", "j+tag@mail.example.co.uk"},
		{"underscore io", "first_last@company.io", "first_last@company.io"},
		{"mailto", "mailto:user@example.org", "user@example.org"},
		{"angle brackets", "Bob <bob@example.net>", "bob@example.net"},
		{"upper case", "UPPER@EXAMPLE.COM", "UPPER@EXAMPLE.COM"},
		{"short", "a@b.de", "a@b.de"},
		{"sentence end", "contact admin@example.com.", "admin@example.com"},
		{"hyphens", "o-reilly@mail.example-shop.travel", "o-reilly@mail.example-shop.travel"},
		{"percent", "user%x@example.com", "user%x@example.com"},
		{"json", `{"email":"x.y@example.dev"}`, "x.y@example.dev"},

		{"retina image", "icon@2x.png", ""},
		{"package version", "pkg@1.2.3", ""},
		{"localhost", "user@localhost", ""},
		{"no local part", "@example.com", ""},
		{"no domain", "user@ ", ""},
		{"double at", "user@@example.com", ""},
		{"no dot", "user@example", ""},
		{"digit tld", "user@example.c0m", ""},
		{"unknown tld", "foo@bar.notarealtld", ""},
		{"leading dot", ".user@example.com", ""},
		{"double dot", "user..name@example.com", ""},
		{"npm scope", "@scope/package", ""},
		{"decorator", "@Override public", ""},
	})
}

func TestPhone(t *testing.T) {
	runDetectorCases(t, only(DetectorPhone), DetectorPhone, []detectorCase{
		{"us international", "call +1 415-555-2671 now", "+1 415-555-2671"},
		{"us parentheses", "(415) 555-2671", "(415) 555-2671"},
		{"us dashes", "415-555-2671", "415-555-2671"},
		{"us dots", "415.555.2671", "415.555.2671"},
		{"us with trunk 1", "1-415-555-2671", "1-415-555-2671"},
		{"e164", `"phone":"+14155552671"`, "+14155552671"},
		{"bare with context", "mobile: 4155552671", "4155552671"},
		{"gb", "+44 20 7946 0958", "+44 20 7946 0958"},
		{"fr", "+33 1 42 68 53 00", "+33 1 42 68 53 00"},
		{"de", "+49 30 901820", "+49 30 901820"},
		{"au", "+61 2 9374 4000", "+61 2 9374 4000"},

		{"date and time", "2024-01-15 10:30:00", ""},
		{"ipv4", "192.168.100.200", ""},
		{"bare without context", "id 4155552671", ""},
		{"ssn", "123-45-6789", ""},
		{"card", "4111 1111 1111 1111", ""},
		{"seven digits", "555-2671", ""},
		{"too short international", "+1 234", ""},
		{"timestamp", "1700000000", ""},
		{"money", "$1,234,567.89", ""},
		{"version", "version 10.15.7.1234", ""},
		{"invalid area code", "123-555-2671", ""},
		{"wrong grouping", "4155-552-671", ""},
	})
}

func TestJWT(t *testing.T) {
	const jwtIO = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	rs := mkJWT(`{"alg":"RS256","kid":"k1"}`, `{"iss":"https://issuer.example.com","exp":1900000000}`, strings.Repeat("Ab_-", 86))
	none := mkJWT(`{"alg":"none"}`, `{"sub":"x"}`, "")
	jwe := mkJWT(`{"alg":"RSA-OAEP","enc":"A256GCM"}`, "", "") + "AAAA.BBBB.CCCC.DDDD"
	jwe = jwe[:strings.Index(jwe, ".")] + ".AAAA.BBBB.CCCC.DDDD"
	runDetectorCases(t, only(DetectorJWT), DetectorJWT, []detectorCase{
		{"jwt.io example", jwtIO, jwtIO},
		{"bearer header", "Authorization: Bearer " + jwtIO, jwtIO},
		{"json string", `{"id_token":"` + rs + `"}`, rs},
		{"query", "token=" + rs + "&x=1", rs},
		{"rs256", rs, rs},
		{"alg none empty signature", none, none},
		{"jwe five parts", jwe, jwe},
		{"sentence end", "use " + jwtIO + ".", jwtIO},
		{"quoted", "'" + rs + "'", rs},
		{"es256", mkJWT(`{"alg":"ES256","typ":"JWT"}`, `{"a":1}`, "sig"), mkJWT(`{"alg":"ES256","typ":"JWT"}`, `{"a":1}`, "sig")},
		{"cookie", "session=" + jwtIO + "; Path=/", jwtIO},

		{"header only", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", ""},
		{"two segments", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0", ""},
		{"no alg", mkJWT(`{"typ":"JWT"}`, `{"a":1}`, "sig"), ""},
		{"header not json", "eyJoZWxsbyB3b3JsZA.eyJzdWIiOiIxIn0.sig", ""},
		{"payload not json", strings.Split(mkJWT(`{"alg":"HS256"}`, "", ""), ".")[0] + ".bm90IGpzb24.sig", ""},
		{"inside a word", "keyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.sig", ""},
		{"dotted names", "a.b.c", ""},
		{"version", "version 1.2.3", ""},
		{"bad base64", "eyJ!!!.eyJ.sig", ""},
		{"glued to base64", "x" + jwtIO, ""},
		{"prose", "they Just left", ""},
	})
}

func TestPrivateKeys(t *testing.T) {
	pemEC, pemPKCS8, pemRSA := testKeys(t)
	body := strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n", 3)
	block := func(label string) string {
		return "-----BEGIN " + label + "-----\n" + body + "-----END " + label + "-----"
	}
	escaped := strings.ReplaceAll(block("RSA PRIVATE KEY"), "\n", `\n`)
	truncated := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + body
	runDetectorCases(t, only(DetectorPrivateKey), DetectorPrivateKey, []detectorCase{
		{"ec generated", pemEC, strings.TrimSpace(pemEC)},
		{"pkcs8 generated", "key:\n" + pemPKCS8, strings.TrimSpace(pemPKCS8)},
		{"rsa generated", pemRSA, strings.TrimSpace(pemRSA)},
		{"openssh", block("OPENSSH PRIVATE KEY"), block("OPENSSH PRIVATE KEY")},
		{"encrypted", block("ENCRYPTED PRIVATE KEY"), block("ENCRYPTED PRIVATE KEY")},
		{"dsa", block("DSA PRIVATE KEY"), block("DSA PRIVATE KEY")},
		{"pgp", block("PGP PRIVATE KEY BLOCK"), block("PGP PRIVATE KEY BLOCK")},
		{"escaped newlines", `KEY="` + escaped + `"`, escaped},
		{"truncated", truncated, truncated},
		{"in prose", "here it is " + block("EC PRIVATE KEY") + " thanks", block("EC PRIVATE KEY")},

		{"public key", block("PUBLIC KEY"), ""},
		{"certificate", block("CERTIFICATE"), ""},
		{"certificate request", block("CERTIFICATE REQUEST"), ""},
		{"pgp public", block("PGP PUBLIC KEY BLOCK"), ""},
		{"short body", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----", ""},
		{"empty", "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----", ""},
		{"no dashes", "BEGIN RSA PRIVATE KEY " + body, ""},
		{"prose", "keep your private key safe", ""},
		{"header alone", "-----BEGIN RSA PRIVATE KEY-----", ""},
		{"crl", block("X509 CRL"), ""},
	})
}

func TestSecrets(t *testing.T) {
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"aws access key", "aws_access_key_id = AKIA5BQZ7XK4LMNR2TUV", "AKIA5BQZ7XK4LMNR2TUV"},
		{"github pat", "GITHUB_TOKEN=ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2", "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"},
		{"github fine-grained", "token: github_pat_11ABCDEFG0a1b2c3d4e5f6_g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0e1F2g3H4i5J", "github_pat_11ABCDEFG0a1b2c3d4e5f6_g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0e1F2g3H4i5J"},
		{"slack bot", "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"},
		{"stripe live", `stripe.api_key = "sk_live_51H8cT2EaBcDeFgHiJkLmNoPq"`, "sk_live_51H8cT2EaBcDeFgHiJkLmNoPq"},
		{"google api key", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"},
		{"twilio", "SK1234567890abcdef1234567890abcdef", "SK1234567890abcdef1234567890abcdef"},
		{"npm", "//registry.npmjs.org/:_authToken=npm_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3gH5", "npm_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3gH5"},
		{"gitlab", "glpat-Ab3De5Gh7Jk9Mn1Pq3St", "glpat-Ab3De5Gh7Jk9Mn1Pq3St"},
		{"generic json", `{"api_key": "f3a9c2e8b7d14f6a9e0c5b2d8a7f1e3c"}`, "f3a9c2e8b7d14f6a9e0c5b2d8a7f1e3c"},
		{"generic env", "DB_PASSWORD=Xk9mP2vL7qR4wN8zT5yB", "Xk9mP2vL7qR4wN8zT5yB"},
		{"anthropic", "sk-ant-api03-" + strings.Repeat("aB3dE5gH7j", 9) + "K9mAA", "sk-ant-api03-" + strings.Repeat("aB3dE5gH7j", 9) + "K9mAA"},
		// Issue 13: on egress an example key is reported like a real one (the reason says it is
		// an example; TestExampleKeys).
		{"aws documentation example", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"},

		{"short github token", "ghp_short", ""},
		{"stripe too short", "sk_live_abc", ""},
		{"prose", "the api key is kept in the vault, access is granted by token", ""},
		{"token count", `{"token_count": 1234, "max_tokens": 4096}`, ""},
		{"password reset", "click the password reset link", ""},
		{"api version", `"api_version": "2024-06-01"`, ""},
		{"low entropy value", `"password": "passwordpassword"`, ""},
		{"uuid id", `"id": "3fa85f64-5717-4562-b3fc-2c963f66afa6"`, ""},
		{"sku", "SKU-12345-BL", ""},
		{"module path", "github.com/zricethezav/gitleaks/v8", ""},
		{"placeholder", `api_key = "${API_KEY}"`, ""},
	})
}

func TestCustomDetectors(t *testing.T) {
	cfg := Config{Actions: map[string]Action{}, Custom: []CustomDetector{
		{Name: "internal-host", Pattern: `\b[a-z0-9-]+\.corp\.example\.com\b`, Keywords: []string{"corp.example.com"}, Action: ActionBlock},
		{Name: "employee-id", Pattern: `\bEMP-(?P<secret>\d{6})\b`, Action: ActionRedact},
	}}
	runDetectorCases(t, cfg, DetectorCustom, []detectorCase{
		{"host", "ssh build-01.corp.example.com", "build-01.corp.example.com"},
		{"host in url", "https://wiki.corp.example.com/page", "wiki.corp.example.com"},
		{"host upper keyword", "db.CORP.EXAMPLE.COM", ""},
		{"host json", `{"host":"ci.corp.example.com"}`, "ci.corp.example.com"},
		{"host hyphen", "a-b-c.corp.example.com:8443", "a-b-c.corp.example.com"},
		{"employee id", "EMP-123456", "123456"},
		{"employee id in text", "ticket for EMP-654321 closed", "654321"},
		{"employee id json", `{"emp":"EMP-000001"}`, "000001"},
		{"employee id parenthesised", "(EMP-111111)", "111111"},
		{"employee id line end", "id:EMP-222222\n", "222222"},
		{"host digits", "10.corp.example.com", "10.corp.example.com"},

		{"other domain", "build-01.example.com", ""},
		{"bare corp domain", "corp.example.com", ""},
		{"lookalike", "build.corp.example.community", ""},
		{"employee id short", "EMP-12345", ""},
		{"employee id long", "EMP-1234567", ""},
		{"employee lower", "emp-123456", ""},
		{"employee glued", "XEMP-123456", ""},
		{"prose", "the corp example is on the com", ""},
		{"empty", "", ""},
		{"employee no dash", "EMP123456", ""},
	})
}
