package dlp

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestGates checks that the gates in secretGates only skip work: over generated key/value text,
// a scanner with gates finds exactly what one without them finds.
func TestGates(t *testing.T) {
	gated, err := New(only(DetectorSecret))
	if err != nil {
		t.Fatal(err)
	}
	ungated := *gated
	ungated.rules = append([]regexRule(nil), gated.rules...)
	n := 0
	for i := range ungated.rules {
		if ungated.rules[i].gate != nil {
			ungated.rules[i].gate = nil
			n++
		}
	}
	want := len(secretGates)
	for _, r := range egressRules {
		if r.gate != nil {
			want++
		}
	}
	if n != want {
		t.Fatalf("%d gated rules loaded, want %d", n, want)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	value := func() string {
		alphabet := pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "0123456789abcdef",
			"abcdef", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "abcXYZ019+/=._-", "ab c")
		var b strings.Builder
		for k := rng.IntN(60); k >= 0; k-- {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	fixed := []string{ // valid shapes for the exact-case gates, and their near misses
		"A3-ASWWYB-798JRYLJVD4-23DC2-86TVM-H43EB", "a3-ASWWYB-798JRYLJVD4-23DC2-86TVM-H43EB", "xA3-ASWWYB-798JRYLJVD4-23DC2-86TVM-H43EB",
		"4b1d" + strings.Repeat("aB3", 12) + "Xy", "4B1D" + strings.Repeat("aB3", 12) + "Xy",
		"EAAM" + strings.Repeat("abc123XYZ0", 11), "eaam" + strings.Repeat("abc123XYZ0", 11), "EAAC" + strings.Repeat("q9", 60) + "'",
		"EAAA" + strings.Repeat("aZ9-_", 6), "sq0atp-" + strings.Repeat("aZ9-_", 6) + " ", "SQ0ATP-" + strings.Repeat("aZ9-_", 6),
		// egress rules' gates: sk-, hf_, api_org_, r8_, and Telegram's :AA
		"sk-" + strings.Repeat("aB3x", 12), "task-" + strings.Repeat("aB3x", 12), "SK-" + strings.Repeat("aB3x", 12),
		"sk-proj-" + strings.Repeat("aB3x_", 12), "-sk-" + strings.Repeat("aB3x", 12),
		"hf_" + strings.Repeat("aBcD3", 7), "HF_" + strings.Repeat("aBcD3", 7), "xhf_" + strings.Repeat("aBcD3", 7),
		"api_org_" + strings.Repeat("aBcD3", 7), "r8_" + strings.Repeat("aBcD3", 8), "_r8_" + strings.Repeat("aBcD3", 8),
		"123456789:AA" + strings.Repeat("aB3-_", 7) + "xyz", "1234567:AA" + strings.Repeat("aB3-_", 7) + "xyz",
		"bot123456789:AA" + strings.Repeat("aB3-_", 7) + "xyz", "123456789:aa" + strings.Repeat("aB3-_", 7) + "xyz",
	}
	found := 0
	for i := 0; i < 20000+len(fixed); i++ {
		text := pick("", "x ", `{"`, "export ", "  ") +
			pick("", "my_", "X-", "db.", "AWS_") +
			pick("api", "key", "token", "secret", "password", "passwd", "auth", "access", "credential", "creds", "s.", "SK", "hvs.", "Api", "API") +
			pick("", "_key", "-id", ".v2", " ", "_TOKEN", "Key", "word") +
			pick("", `"`, "'", " ", "  ") +
			pick("=", ":", ":=", "::=", "=>", "||", "?=", ",", ">", " ", ";", "") +
			pick("", " ", `"`, "'", "`", "==", " \"") +
			value() +
			pick("", `"`, "'", " ", ";", `\n`, "\n", ",", ".", "}") +
			pick("", "tail", " more text")
		if i >= 20000 {
			text = pick("", "key: ", `"`) + fixed[i-20000] + pick("", " ", `"`)
		}
		a, _ := gated.scanText([]byte(text), gated.newReqState())
		b, _ := ungated.scanText([]byte(text), ungated.newReqState())
		if len(a) != len(b) {
			t.Fatalf("%q: %d findings with gates, %d without", text, len(a), len(b))
		}
		for k := range a {
			if a[k].start != b[k].start || a[k].end != b[k].end || a[k].rule != b[k].rule {
				t.Fatalf("%q: finding %d differs: %+v vs %+v", text, k, a[k], b[k])
			}
		}
		found += len(a)
	}
	if found < 100 {
		t.Errorf("only %d findings in the generated text: the test checks little", found)
	}
	t.Logf("%d findings agree", found)
}
