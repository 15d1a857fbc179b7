package dlp

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
)

// Secrets come from two tables. The egress rules (egressrules.go) are this package's own, for
// the credentials agents handle most. The rest come from gitleaks' default rule set
// (github.com/zricethezav/gitleaks/v8/config, the TOML embedded in the module: ~220 rules with
// regexes, keywords, entropy thresholds and allowlists), minus the rules an egress rule
// replaces. Only the rules are taken from gitleaks; they run in this package's keyword windows
// (regexrules.go), not in gitleaks' detector, which runs each rule whose keyword occurs
// anywhere over the whole input and so scanned a 10 MB JSON body at 0.1 MB/s here.
//
// gitleaks' rules are changed for egress in three ways:
//
//   - Their token terminator, (?:[\x60'"\s;]|\\[nr]|$), which ends a key only at a quote, a
//     blank, ';' or an escaped line break, becomes any character outside [A-Za-z0-9_-]: a key
//     followed by '&', '/', ',' or ')' in a URL or a form is found (but in keepTerminator).
//   - Allowlists that excuse a value for being a known example (AWS's ...EXAMPLE keys, the
//     Google API keys of public documentation, gitleaks' global stopwords) no longer drop the
//     match: it is reported like a real key, with "(an example key)" in its reason.
//   - Allowlists that say a value is not a value at all stay: the global ones for references
//     and templates ($VAR, ${VAR}, {{ .x }}, %VAR%) and constant runs, and those of the three
//     heuristic rules that have no shape of their own (generic-api-key: names that are not
//     credentials such as public_key or key_id, values of letters only; kubernetes-secret-yaml;
//     vault-service-token's letters-only s. values). generic-api-key's stopwords become a
//     coverage test: a value is dropped when dictionary words cover half of it
//     ("oauth2_client_credentials"), not when it merely contains one ("Xk9m_test_P2vL7qR4wN");
//     and a value shaped like an identifier of code ("x509.KeyUsageDigitalSignature") is
//     dropped unless its name says password (wordLike).
//
// Left out: rules replaced by a detector of this package ("private-key", "jwt"), rules that
// match file paths (nothing here has one), and composite rules (RequiredRules) with their
// auxiliary SkipReport rules.

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

// gitleaksTerminator is the token end of many gitleaks rules, and egressTerminator what it
// becomes here.
const (
	gitleaksTerminator = `(?:[\x60'"\s;]|\\[nr]|$)`
	egressTerminator   = `(?:[^0-9A-Za-z_\-]|$)`
)

// keepTerminator are the rules whose token end stays gitleaks': generic-api-key, whose loose
// value class would then match the start of paths and base64 values, and vault-service-token,
// whose legacy "s." form would match method calls (s.ReadUint16LengthPrefixed(...)).
var keepTerminator = map[string]bool{"generic-api-key": true, "vault-service-token": true}

// filterAllowlistRules are the gitleaks rules whose allowlists are kept as filters: they have no
// shape of their own, and their allowlists say what is not a credential rather than which
// credentials are examples.
var filterAllowlistRules = map[string]bool{"generic-api-key": true, "kubernetes-secret-yaml": true, "vault-service-token": true}

var (
	secretPrepOnce sync.Once
	secretPrep     struct {
		egress       []regexRule // compiled egress rules, without actions
		gitleaks     []regexRule // compiled gitleaks rules, without actions
		globalFilter []*config.Allowlist
		globalExampl []*config.Allowlist
		err          error
	}
)

// preparedSecretRules compiles both tables once per process.
func preparedSecretRules() ([]regexRule, []regexRule, error) {
	secretPrepOnce.Do(func() {
		p := &secretPrep
		gl, err := gitleaksRules()
		if err != nil {
			p.err = err
			return
		}
		for _, a := range gl.Allowlists {
			if len(a.Regexes) > 0 {
				f := &config.Allowlist{Description: a.Description, MatchCondition: a.MatchCondition,
					Commits: a.Commits, Paths: a.Paths, RegexTarget: a.RegexTarget, Regexes: a.Regexes}
				if p.err = f.Validate(); p.err != nil {
					return
				}
				p.globalFilter = append(p.globalFilter, f)
			}
			if len(a.StopWords) > 0 {
				e := &config.Allowlist{Description: a.Description, StopWords: a.StopWords}
				if p.err = e.Validate(); p.err != nil {
					return
				}
				p.globalExampl = append(p.globalExampl, e)
			}
		}
		replaced := replacedByEgress()
		for _, er := range egressRules {
			re, err := regexp.Compile(er.pattern)
			if err != nil {
				p.err = fmt.Errorf("dlp: egress rule %s: %w", er.id, err)
				return
			}
			rr := regexRule{detector: DetectorSecret, id: er.id, desc: er.desc, re: re, entropy: er.entropy,
				keywords: er.keywords, check: er.check, gate: er.gate, exampleValues: er.examples,
				exampleSuffix: exampleSuffix(er.exampleNoun), global: p.globalFilter, globalExamples: p.globalExampl}
			for _, g := range er.replaces {
				if gr, ok := gl.Rules[g]; ok {
					rr.examples = append(rr.examples, gr.Allowlists...)
				}
			}
			rr.setWindow()
			p.egress = append(p.egress, rr)
		}
		for _, id := range gl.OrderedRules {
			r := gl.Rules[id]
			if r.Regex == nil || r.Path != nil || r.SkipReport || len(r.RequiredRules) > 0 ||
				replacedGitleaksRules[id] || replaced[id] != "" || len(r.Keywords) == 0 {
				continue
			}
			re := r.Regex
			// Not generic-api-key: its values may hold '/' and '+' in one of its alternatives
			// only, and a loose end would match the first part of a path or a base64 value.
			if src := re.String(); !keepTerminator[id] && strings.Contains(src, gitleaksTerminator) {
				if re, err = regexp.Compile(strings.ReplaceAll(src, gitleaksTerminator, egressTerminator)); err != nil {
					p.err = fmt.Errorf("dlp: gitleaks rule %s: %w", id, err)
					return
				}
			}
			rr := regexRule{
				detector:       DetectorSecret,
				id:             id,
				desc:           "a secret (gitleaks rule " + id + ")",
				re:             re,
				secretGroup:    r.SecretGroup,
				entropy:        r.Entropy,
				global:         p.globalFilter,
				globalExamples: p.globalExampl,
				keywords:       r.Keywords,
				exampleSuffix:  exampleSuffix(""),
			}
			if d, ok := gitleaksDescs[id]; ok {
				rr.desc = d
			}
			if filterAllowlistRules[id] {
				for _, a := range r.Allowlists {
					if len(a.StopWords) == 0 {
						rr.allow = append(rr.allow, a)
						continue
					}
					rr.words = newWordSet(a.StopWords)
					if len(a.Regexes) > 0 || len(a.Paths) > 0 || len(a.Commits) > 0 {
						f := &config.Allowlist{Description: a.Description, MatchCondition: a.MatchCondition,
							Commits: a.Commits, Paths: a.Paths, RegexTarget: a.RegexTarget, Regexes: a.Regexes}
						if p.err = f.Validate(); p.err != nil {
							return
						}
						rr.allow = append(rr.allow, f)
					}
				}
			} else {
				rr.examples = r.Allowlists
			}
			rr.setWindow()
			rr.gate = secretGates[id]
			if id == "generic-api-key" {
				rr.before = 64 // `[\w.-]{0,50}?` before the keyword
			}
			p.gitleaks = append(p.gitleaks, rr)
		}
	})
	return secretPrep.egress, secretPrep.gitleaks, secretPrep.err
}

// gitleaksDescs names, for the reason, what some gitleaks rules find.
var gitleaksDescs = map[string]string{
	"azure-ad-client-secret":    "an Azure AD client secret",
	"telegram-bot-api-token":    "a Telegram bot token",
	"discord-api-token":         "a Discord API token",
	"npm-access-token":          "an npm access token",
	"pypi-upload-token":         "a PyPI upload token",
	"generic-api-key":           "a secret (gitleaks rule generic-api-key)",
	"sendgrid-api-token":        "a SendGrid API key",
	"twilio-api-key":            "a Twilio API key",
	"digitalocean-pat":          "a DigitalOcean token",
	"heroku-api-key":            "a Heroku API key",
	"shopify-access-token":      "a Shopify access token",
	"mailgun-private-api-token": "a Mailgun API key",
}

// secretRules returns the enabled secret rules (egress rules, then gitleaks') with their actions.
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
	egress, gitleaks, err := preparedSecretRules()
	if err != nil {
		return nil, err
	}
	gl, _ := gitleaksRules()
	known := func(id string) bool {
		_, ok := gl.Rules[id]
		return ok || egressRuleIDs()[id]
	}
	disabled := map[string]bool{}
	for _, id := range cfg.DisableSecretRules {
		if !known(id) {
			return nil, fmt.Errorf("dlp: DisableSecretRules: no secret rule %q", id)
		}
		disabled[id] = true
	}
	for k := range cfg.Actions {
		if id, ok := strings.CutPrefix(k, DetectorSecret+":"); ok && !known(id) {
			return nil, fmt.Errorf("dlp: detector %q: no secret rule %q", k, id)
		}
	}
	var out []regexRule
	for _, r := range append(append([]regexRule(nil), egress...), gitleaks...) {
		if disabled[r.id] {
			continue
		}
		r.action = cfg.action(DetectorSecret, r.id)
		if r.action.rank() == 0 {
			continue
		}
		out = append(out, r)
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
