package dlp

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
)

// Secrets come from gitleaks' default rule set (github.com/zricethezav/gitleaks/v8/config, the
// TOML embedded in the module: ~220 rules with regexes, keywords, entropy thresholds and
// allowlists). Only the rules are taken from gitleaks; they run in this package's keyword
// windows (regexrules.go), not in gitleaks' detector, which runs each rule whose keyword occurs
// anywhere over the whole input and so scanned a 10 MB JSON body at 0.1 MB/s here.
//
// Left out: rules replaced by a detector of this package ("private-key", "jwt"), rules that
// match file paths (nothing here has one), and composite rules (RequiredRules) with their
// auxiliary SkipReport rules. gitleaks' recursive decoding of base64/hex/percent-encoded
// fragments is not done: the scanner decodes what HTTP encodes (Content-Encoding, percent
// encoding of URLs and forms, JSON string escapes, multipart), not what an agent might encode
// on purpose, which no DLP can follow.

var replacedGitleaksRules = map[string]bool{"private-key": true, "jwt": true}

var (
	gitleaksOnce sync.Once
	gitleaksCfg  config.Config
	gitleaksErr  error
)

// gitleaksRules parses and compiles gitleaks' default config once per process (~100 ms).
func gitleaksRules() (config.Config, error) {
	gitleaksOnce.Do(func() {
		v := viper.New()
		v.SetConfigType("toml")
		if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
			gitleaksErr = fmt.Errorf("dlp: gitleaks default config: %w", err)
			return
		}
		var vc config.ViperConfig
		if err := v.Unmarshal(&vc); err != nil {
			gitleaksErr = fmt.Errorf("dlp: gitleaks default config: %w", err)
			return
		}
		gitleaksCfg, gitleaksErr = vc.Translate()
		if gitleaksErr != nil {
			gitleaksErr = fmt.Errorf("dlp: gitleaks default config: %w", gitleaksErr)
		}
	})
	return gitleaksCfg, gitleaksErr
}

// secretRules returns the enabled gitleaks rules as regex rules.
func secretRules(cfg *Config) ([]regexRule, error) {
	any := false
	for k, a := range cfg.Actions {
		if (k == DetectorSecret || strings.HasPrefix(k, DetectorSecret+":")) && a.rank() > 0 {
			any = true
		}
	}
	if !any {
		return nil, nil
	}
	gl, err := gitleaksRules()
	if err != nil {
		return nil, err
	}
	disabled := map[string]bool{}
	for _, id := range cfg.DisableSecretRules {
		if _, ok := gl.Rules[id]; !ok {
			return nil, fmt.Errorf("dlp: DisableSecretRules: no gitleaks rule %q", id)
		}
		disabled[id] = true
	}
	for k := range cfg.Actions {
		if id, ok := strings.CutPrefix(k, DetectorSecret+":"); ok {
			if _, known := gl.Rules[id]; !known {
				return nil, fmt.Errorf("dlp: detector %q: no gitleaks rule %q", k, id)
			}
		}
	}
	var out []regexRule
	for _, id := range gl.OrderedRules {
		r := gl.Rules[id]
		if r.Regex == nil || r.Path != nil || r.SkipReport || len(r.RequiredRules) > 0 ||
			replacedGitleaksRules[id] || disabled[id] || len(r.Keywords) == 0 {
			continue
		}
		a := cfg.action(DetectorSecret, id)
		if a.rank() == 0 {
			continue
		}
		rr := regexRule{
			detector:    DetectorSecret,
			id:          id,
			desc:        "a secret (gitleaks rule " + id + ")",
			re:          r.Regex,
			secretGroup: r.SecretGroup,
			entropy:     r.Entropy,
			allow:       r.Allowlists,
			global:      gl.Allowlists,
			keywords:    r.Keywords,
			action:      a,
		}
		rr.setWindow()
		rr.gate = secretGates[id]
		if id == "generic-api-key" {
			rr.before = 64 // `[\w.-]{0,50}?` before the keyword
		}
		out = append(out, rr)
	}
	return out, nil
}

// customRules compiles the policy's custom detectors.
func customRules(cfg *Config) ([]regexRule, error) {
	var out []regexRule
	for _, d := range cfg.Custom {
		re, err := regexp.Compile(d.Pattern)
		if err != nil {
			return nil, fmt.Errorf("dlp: custom detector %q: %w", d.Name, err)
		}
		desc := d.Description
		if desc == "" {
			desc = fmt.Sprintf("the custom detector %q", d.Name)
		}
		r := regexRule{detector: DetectorCustom, id: d.Name, desc: "a match of " + desc, re: re,
			secretGroup: -1, action: d.Action}
		if i := re.SubexpIndex("secret"); i > 0 {
			r.secretGroup = i
		}
		for _, k := range d.Keywords {
			if k = strings.ToLower(k); k != "" {
				r.keywords = append(r.keywords, k)
			}
		}
		r.setWindow()
		out = append(out, r)
	}
	return out, nil
}

// Gates are cheap necessary conditions checked at a keyword hit before its window is added, for
// the rules whose keywords are common in prose and JSON field names (key, token, api, access,
// "s.", "sk"): they hit every few hundred bytes, and a window of the generic rule costs up to
// ~200 µs in Go's regexp (its counted repetitions make a large NFA). A gate returns whether the
// rule can match through this keyword occurrence and, if it knows, where such a match ends at
// the latest (0 if not). TestGates checks that no gate rejects a window the regex matches.
//
// The rules whose keywords are short and hexadecimal-looking ("a3-", "4b1d", "eaaa") get a gate
// too: UUIDs and hashes hit them, and a body of UUIDs would otherwise spend its regex budget.
var secretGates = map[string]func(text []byte, kwStart, kwEnd int) (bool, int){
	"generic-api-key":                 genericGate,
	"vault-service-token":             vaultGate,
	"twilio-api-key":                  twilioGate,
	"1password-secret-key":            exactCaseGate("A3-"),             // \bA3-[A-Z0-9]{6}-...
	"clickhouse-cloud-api-secret-key": exactCaseGate("4b1d"),            // \b(4b1d[A-Za-z0-9]{38})\b
	"facebook-page-access-token":      exactCaseGate("EAAM", "EAAC"),    // \b(EAA[MC](?i)[a-z0-9]{100,})
	"square-access-token":             exactCaseGate("EAAA", "sq0atp-"), // \b((?:EAAA|sq0atp-)[\w-]{22,60})
}

// exactCaseGate is for a rule whose regex starts with \b and one of the literals, case-sensitive:
// the keyword hit must be one of them, in that case, not preceded by a word character.
func exactCaseGate(literals ...string) func(text []byte, kwStart, kwEnd int) (bool, int) {
	return func(text []byte, kwStart, kwEnd int) (bool, int) {
		if kwStart > 0 && isWord(text[kwStart-1]) {
			return false, 0
		}
		for _, l := range literals {
			if string(text[kwStart:kwEnd]) == l {
				return true, 0
			}
		}
		return false, 0
	}
}

// genericGate: gitleaks' generic-api-key rule is
//
//	(?i)[\w.-]{0,50}?(?:access|auth|...|token)(?:[ \t\w.-]{0,20})[\s'"]{0,3}
//	(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'"\s=]{0,5}
//	([\w.=-]{10,150}|[a-z0-9][a-z0-9+/]{11,}={0,3})(?:[\x60'"\s;]|\\[nr]|$)
//
// with an entropy threshold of 3.5 bits on the value. So after the keyword there must be,
// within 23 bytes of identifier characters, blanks and quotes, an operator character, and then
// within 9 bytes of operator characters, quotes and blanks, a run of value characters holding
// the value. A value above 3.5 bits has at least 12 distinct characters (log2 11 < 3.5), and so
// has the run: that condition is what rejects prose ("access, permission").
func genericGate(text []byte, _, kwEnd int) (bool, int) {
	i, n := kwEnd, len(text)
	for ; i < n && i-kwEnd <= 23; i++ {
		c := text[i]
		if isWord(c) || c == '.' || c == '-' || isSpace(c) || c == '\'' || c == '"' {
			continue
		}
		break
	}
	if i >= n || !isOperator(text[i]) {
		return false, 0
	}
	// The operator (up to 4 bytes: ":::=") and up to 5 of [`'"\s=], then the value.
	j := i + 1
	for j < n && j-i < 10 && (isOperator(text[j]) || isSpace(text[j]) || text[j] == '\'' || text[j] == '"' || text[j] == '`') {
		j++
	}
	if j >= n || !isValueChar(text[j]) {
		return false, 0
	}
	for j > i+1 && text[j-1] == '=' { // '=' may belong to the value
		j--
	}
	k := j
	var seen [4]uint64
	distinct := 0
	for k < n && isValueChar(text[k]) {
		if b := text[k]; seen[b>>6]&(1<<(b&63)) == 0 {
			seen[b>>6] |= 1 << (b & 63)
			distinct++
		}
		k++
	}
	if k-j >= 10 && distinct >= 12 {
		return true, k + 4
	}
	return false, 0
}

// vaultGate: \b((?:hvs\.[\w-]{90,120}|s\.(?i:[a-z0-9]{24})))... — the "s." keyword must start a
// word and be followed by 24 letters or digits.
func vaultGate(text []byte, kwStart, kwEnd int) (bool, int) {
	if kwEnd-kwStart != 2 {
		return true, 0 // "hvs."
	}
	if kwStart > 0 && isWord(text[kwStart-1]) || kwEnd+24 > len(text) {
		return false, 0
	}
	for _, c := range text[kwEnd : kwEnd+24] {
		if byteClass[c]&(clsDigit|clsUpper|clsLower) == 0 {
			return false, 0
		}
	}
	return true, 0
}

// twilioGate: SK[0-9a-fA-F]{32} is case-sensitive; the keyword is "sk".
func twilioGate(text []byte, kwStart, kwEnd int) (bool, int) {
	if text[kwStart] != 'S' || text[kwStart+1] != 'K' || kwEnd+32 > len(text) {
		return false, 0
	}
	for _, c := range text[kwEnd : kwEnd+32] {
		if !isHex(c) {
			return false, 0
		}
	}
	return true, kwEnd + 32
}

func isHex(c byte) bool { return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F') }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isOperator(c byte) bool {
	return c == '=' || c == '>' || c == ':' || c == '|' || c == '?' || c == ','
}

func isValueChar(c byte) bool {
	return isWord(c) || c == '.' || c == '=' || c == '-' || c == '+' || c == '/'
}
