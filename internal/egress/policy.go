package egress

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Mode says what a profile does with what it decides.
type Mode string

const (
	ModeDisabled Mode = "disabled" // no policy, no DLP; the SSRF guard holds
	ModeWarn     Mode = "warn"     // decide and record, block and change nothing
	ModeEnforce  Mode = "enforce"
)

// Profile is one named egress policy, read from a YAML file.
type Profile struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Mode        Mode   `yaml:"mode"`
	// Allow and Deny are rules; deny wins. What no allow rule matches is denied.
	Allow []Rule `yaml:"allow"`
	Deny  []Rule `yaml:"deny"`
	// Passthrough hosts are tunnelled without TLS interception (by SNI): policy applies to the
	// host only, DLP cannot see inside. They must also be allowed.
	Passthrough []string `yaml:"passthrough"`
	// Intents map an intent's name to the extra rules it opens while it is a session's current
	// intent.
	Intents map[string]Intent `yaml:"intents"`
	// DangerousPorts are refused unless a rule names the port explicitly. Default
	// DefaultDangerousPorts.
	DangerousPorts []int `yaml:"dangerous_ports"`
	// AllowPrivate lists networks the SSRF guard lets through (CIDRs), for a trusted internal
	// service. Default none.
	AllowPrivate []string `yaml:"allow_private"`
	DLP          DLP      `yaml:"dlp"`
	Alerts       Alerts   `yaml:"alerts"`

	allowPrivate []*net.IPNet
	file         string
}

// Rule matches requests. Domain is required; the rest default to "any".
type Rule struct {
	// Domain is a host name; "*.example.com" matches every subdomain (not example.com itself),
	// "*" every host.
	Domain string `yaml:"domain"`
	// Ports default to 80 and 443.
	Ports []int `yaml:"ports"`
	// Methods (GET, POST...) default to any.
	Methods []string `yaml:"methods"`
	// Paths are URL path prefixes; default any.
	Paths []string `yaml:"paths"`

	line int
}

// UnmarshalYAML accepts a bare domain as a rule.
func (r *Rule) UnmarshalYAML(n *yaml.Node) error {
	r.line = n.Line
	if n.Kind == yaml.ScalarNode {
		r.Domain = n.Value
		return nil
	}
	type plain Rule
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	p.line = n.Line
	*r = Rule(p)
	return nil
}

// Intent is a named purpose that opens rules while it is current.
type Intent struct {
	Description string `yaml:"description"`
	Allow       []Rule `yaml:"allow"`
	// MaxTTL bounds how long the intent may be set for. Default 1h.
	MaxTTL Duration `yaml:"max_ttl"`
}

// DLP configures the data-loss checks of a profile.
type DLP struct {
	// Actions maps a detector (payment_card, secret, private_key, jwt, email, phone, iban,
	// us_ssn, or a custom one) to block, redact or log. Detectors not named are off.
	Actions map[string]string `yaml:"actions"`
	// Custom detectors: a name, an RE2 pattern and an action.
	Custom []CustomDetector `yaml:"custom"`
	// MaxBodyBytes is how much of a body is scanned (before and after decompression). Default
	// 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Oversize is what happens to a body larger than MaxBodyBytes: block (default),
	// scan-prefix (scan the first MaxBodyBytes, send the rest unscanned; a redact finding then
	// blocks) or allow-unscanned.
	Oversize string `yaml:"oversize"`
}

// CustomDetector is a detector defined by a policy.
type CustomDetector struct {
	Name    string `yaml:"name"`
	Pattern string `yaml:"pattern"`
	Action  string `yaml:"action"`
}

// Alerts configure the violation monitor.
type Alerts struct {
	// Threshold violations within Window raise an alert. Default 3 in 5m; 0 turns alerts off.
	Threshold int      `yaml:"threshold"`
	Window    Duration `yaml:"window"`
	// EndSession ends the session at an alert (enforce mode only).
	EndSession bool `yaml:"end_session"`
	// Webhook, when set, receives each alert as a JSON POST.
	Webhook string `yaml:"webhook"`
}

// Duration reads "5m" from YAML.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 5m: %w", n.Line, n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// DefaultDangerousPorts are ports whose services are attack surface more than web APIs: SSH,
// telnet, SMTP, RDP, VNC, databases and the like.
var DefaultDangerousPorts = []int{19, 21, 22, 23, 25, 111, 135, 137, 138, 139, 445, 465, 587, 1433, 1521, 2375, 2376, 3306, 3389, 5432, 5900, 5901, 6379, 9200, 11211, 27017}

// Detectors the DLP stage knows by name (custom ones come on top).
var Detectors = []string{"payment_card", "secret", "private_key", "jwt", "email", "phone", "iban", "us_ssn"}

//go:embed profiles/*.yaml
var shipped embed.FS

// PolicyError is a policy file that cannot be used, with the line at fault.
type PolicyError struct {
	File string
	Line int
	Msg  string
}

func (e *PolicyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ParseProfile reads and validates one profile.
func ParseProfile(file string, data []byte) (*Profile, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	var p Profile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, yamlError(file, err)
	}
	p.file = file
	if err := p.validate(&root); err != nil {
		return nil, err
	}
	return &p, nil
}

// yamlError turns yaml.v3's "yaml: line N: msg" into a PolicyError.
func yamlError(file string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ":"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				line, msg = v, strings.TrimSpace(tail)
			}
		}
	}
	return &PolicyError{File: file, Line: line, Msg: msg}
}

func (p *Profile) validate(root *yaml.Node) error {
	fail := func(line int, format string, args ...any) error {
		return &PolicyError{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	keyLine := func(key string) int {
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			m := root.Content[0]
			for i := 0; i+1 < len(m.Content); i += 2 {
				if m.Content[i].Value == key {
					return m.Content[i].Line
				}
			}
		}
		return 0
	}
	if p.Name == "" {
		return fail(0, "the profile has no name")
	}
	if !validName(p.Name) {
		return fail(keyLine("name"), "profile name %q: use letters, digits, - and _", p.Name)
	}
	switch p.Mode {
	case "":
		p.Mode = ModeEnforce
	case ModeDisabled, ModeWarn, ModeEnforce:
	default:
		return fail(keyLine("mode"), "mode %q: use disabled, warn or enforce", p.Mode)
	}
	checkRules := func(rules []Rule) error {
		for i := range rules {
			if err := rules[i].check(); err != nil {
				return fail(rules[i].line, "%v", err)
			}
		}
		return nil
	}
	if err := checkRules(p.Allow); err != nil {
		return err
	}
	if err := checkRules(p.Deny); err != nil {
		return err
	}
	for name, in := range p.Intents {
		if !validName(name) {
			return fail(keyLine("intents"), "intent name %q: use letters, digits, - and _", name)
		}
		if len(in.Allow) == 0 {
			return fail(keyLine("intents"), "intent %q opens nothing: give it allow rules", name)
		}
		if err := checkRules(in.Allow); err != nil {
			return err
		}
		if in.MaxTTL == 0 {
			in.MaxTTL = Duration(time.Hour)
			p.Intents[name] = in
		}
	}
	for _, h := range p.Passthrough {
		if err := checkDomain(h); err != nil {
			return fail(keyLine("passthrough"), "passthrough %v", err)
		}
	}
	if p.DangerousPorts == nil {
		p.DangerousPorts = DefaultDangerousPorts
	}
	for _, c := range p.AllowPrivate {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			return fail(keyLine("allow_private"), "allow_private %q is not a CIDR like 10.1.0.0/16", c)
		}
		p.allowPrivate = append(p.allowPrivate, n)
	}
	for det, action := range p.DLP.Actions {
		base, rule, _ := strings.Cut(det, ":")
		if !(slices.Contains(Detectors, det) || base == "secret" && rule != "") && !slices.ContainsFunc(p.DLP.Custom, func(c CustomDetector) bool { return c.Name == det }) {
			return fail(keyLine("dlp"), "dlp: unknown detector %q (known: %s)", det, strings.Join(Detectors, ", "))
		}
		if !validAction(action) {
			return fail(keyLine("dlp"), "dlp: detector %s: action %q, use block, redact or log", det, action)
		}
	}
	for _, c := range p.DLP.Custom {
		if !validName(c.Name) || c.Pattern == "" || !validAction(c.Action) {
			return fail(keyLine("dlp"), "dlp: custom detector %q needs a name, a pattern and an action (block, redact or log)", c.Name)
		}
	}
	if p.DLP.MaxBodyBytes == 0 {
		p.DLP.MaxBodyBytes = 1 << 20
	}
	switch p.DLP.Oversize {
	case "":
		p.DLP.Oversize = "block"
	case "block", "scan-prefix", "allow-unscanned":
	default:
		return fail(keyLine("dlp"), "dlp: oversize %q, use block, scan-prefix or allow-unscanned", p.DLP.Oversize)
	}
	if p.Alerts.Threshold < 0 {
		return fail(keyLine("alerts"), "alerts: threshold must not be negative")
	}
	if p.Alerts.Window == 0 {
		p.Alerts.Window = Duration(5 * time.Minute)
	}
	return nil
}

func validAction(a string) bool { return a == "block" || a == "redact" || a == "log" }

func validName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (r *Rule) check() error {
	if err := checkDomain(r.Domain); err != nil {
		return err
	}
	for _, p := range r.Ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("rule for %s: port %d is out of range", r.Domain, p)
		}
	}
	for i, m := range r.Methods {
		m = strings.ToUpper(m)
		switch m {
		case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		default:
			return fmt.Errorf("rule for %s: method %q is not an HTTP method", r.Domain, m)
		}
		r.Methods[i] = m
	}
	for _, p := range r.Paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("rule for %s: path %q must start with /", r.Domain, p)
		}
	}
	return nil
}

func checkDomain(d string) error {
	if d == "" {
		return errors.New("a rule needs a domain")
	}
	if d == "*" {
		return nil
	}
	name := strings.TrimPrefix(d, "*.")
	if strings.ContainsAny(name, "*/:@ ") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return fmt.Errorf("domain %q: give a host name, optionally starting with *. (no scheme, port or path)", d)
	}
	return nil
}

// Profiles is a set of profiles by name.
type Profiles map[string]*Profile

// LoadProfiles reads the shipped profiles (default, strict, api-only) and then every *.yaml in
// dir, which may override them by name. An empty dir reads the shipped ones only.
func LoadProfiles(dir string) (Profiles, error) {
	ps := Profiles{}
	ents, _ := fs.ReadDir(shipped, "profiles")
	for _, e := range ents {
		b, _ := shipped.ReadFile("profiles/" + e.Name())
		p, err := ParseProfile("profiles/"+e.Name()+" (shipped)", b)
		if err != nil {
			return nil, err
		}
		ps[p.Name] = p
	}
	if dir == "" {
		return ps, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := ParseProfile(f, b)
		if err != nil {
			return nil, err
		}
		if other, ok := seen[p.Name]; ok {
			return nil, &PolicyError{File: f, Msg: fmt.Sprintf("profile %q is also defined in %s", p.Name, other)}
		}
		seen[p.Name] = f
		ps[p.Name] = p
	}
	return ps, nil
}

// Names lists the profiles, sorted.
func (ps Profiles) Names() []string {
	var out []string
	for n := range ps {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
