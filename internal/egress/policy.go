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
	// Hostnames are the checks on a request's host name, made before it is resolved.
	Hostnames Hostnames `yaml:"hostnames"`
	// Entropy flags high-entropy tokens in URL paths, query parameters and headers.
	Entropy Entropy `yaml:"entropy"`
	// Volume bounds the bytes a session sends to one destination.
	Volume Volume `yaml:"volume"`
	// Responses is the scanning of what comes back for instructions addressed to the model.
	Responses Responses `yaml:"responses"`
	// MCP governs the tools of hosted MCP servers (mcptools.go).
	MCP MCP `yaml:"mcp"`

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
	// MCP opens or closes hosted MCP servers' tools while the intent is current.
	MCP IntentMCP `yaml:"mcp"`
}

// DLP configures the data-loss checks of a profile.
type DLP struct {
	// Actions maps a detector (payment_card, secret, private_key, jwt, email, phone, iban,
	// us_ssn, crypto_address, crypto_private_key, seed_phrase, or a custom one) to block, redact
	// or log. Detectors not named are off.
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

// Hostnames configures the checks on host names (hostcheck.go). They run on the name as the
// sandbox sent it, before any DNS query, for plain HTTP requests, CONNECT and the requests inside
// an intercepted tunnel: a name that fails is refused without being resolved. The profile's DLP
// detectors scan the name too (with the same actions as elsewhere; redact blocks, since a name
// cannot be rewritten).
type Hostnames struct {
	// Action is what a name that fails a check below gets: block (the default), log, or off.
	Action string `yaml:"action"`
	// MaxLabelLength is the longest label allowed, in bytes. Default 50 (DNS allows 63).
	MaxLabelLength int `yaml:"max_label_length"`
	// MaxNameLength is the longest name allowed. Default 128 (DNS allows 253).
	MaxNameLength int `yaml:"max_name_length"`
	// EntropyMinLength and EntropyBits judge labels, and the subdomain part of the name with its
	// dots and dashes removed, as random: at least EntropyMinLength bytes, Shannon entropy above
	// EntropyBits bits per byte, and fewer than 30% vowels among the letters (random text has
	// ~19%, English words ~38%). A run of 32 or more hex digits with both letters and digits is
	// random too. Defaults 24 and 3.7.
	EntropyMinLength int     `yaml:"entropy_min_length"`
	EntropyBits      float64 `yaml:"entropy_bits"`
	// SubdomainBudget is how many distinct subdomains of one registrable domain (the public
	// suffix list's eTLD+1, as compiled into golang.org/x/net/publicsuffix) a session may use;
	// a new one past it fails. Default 32; 0 turns it off.
	SubdomainBudget *int `yaml:"subdomain_budget"`
	// Exempt names domains ("*.r2.cloudflarestorage.com") whose names are not judged by length,
	// entropy or budget; DLP still scans them.
	Exempt []string `yaml:"exempt"`
}

// Entropy configures the flagging of high-entropy tokens in URL paths, query parameters (names
// and values) and header values (entropy.go): runs of [A-Za-z0-9+/=] of at least MinLength bytes
// whose Shannon entropy is above Bits bits per byte and whose letters are less than 30% vowels.
// Hex (at most 4 bits) never is; random base64 of 32 bytes and more nearly always is.
type Entropy struct {
	// Action: log (the default), block, or off.
	Action string `yaml:"action"`
	// MinLength is the shortest token judged. Default 32.
	MinLength int `yaml:"min_length"`
	// Bits is the entropy threshold, in bits per byte. Default 4.0.
	Bits float64 `yaml:"bits"`
	// IgnoreHeaders are headers not judged (e.g. Authorization, whose bearer tokens are random
	// by design, when the action is block). Default none.
	IgnoreHeaders []string `yaml:"ignore_headers"`
}

// Volume bounds what a session sends to one destination: a registrable domain (eTLD+1), or an
// address when the host is one. Counted are the request line, headers and body bytes of every
// request the gateway lets out (pass-through tunnels, which it cannot see into, are not).
type Volume struct {
	// MaxBytesPerDestination: past it, requests to that destination are refused for the rest of
	// the session. "256MiB", "1GB" or a number of bytes. Default 256 MiB; 0 turns the limit off
	// (the bytes are still counted).
	MaxBytesPerDestination *ByteSize `yaml:"max_bytes_per_destination"`
}

// Responses configures the scanning of responses (package promptscan): text types only
// (text/*, JSON, XML; not text/event-stream), the first MaxBytes after undoing gzip or deflate.
type Responses struct {
	// Action is what a response with instructions addressed to the model gets: annotate (the
	// default: sent on with an X-Agentbox-Warning header that names what was found, and
	// recorded), log (recorded only), block (replaced by a 403 that says why), or off.
	Action string `yaml:"action"`
	// MaxBytes is how much of a response is read before it is sent on, and scanned. Default
	// 1 MiB; the rest streams unscanned.
	MaxBytes ByteSize `yaml:"max_bytes"`
}

// ByteSize reads "256MiB", "64MB", "1GiB", "512KiB" or a plain number of bytes from YAML.
type ByteSize int64

func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a size like 64MiB: %w", n.Line, n.Value, err)
	}
	*b = ByteSize(v)
	return nil
}

func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num := strings.TrimRightFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r == ' ' })
	unit := strings.TrimSpace(s[len(num):])
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("unknown unit %q (B, KB, MB, GB, KiB, MiB, GiB)", unit)
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, errors.New("not a non-negative whole number")
	}
	return v * mult, nil
}

func (b ByteSize) String() string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d bytes", int64(b))
}

// Defaults of the settings above.
const (
	DefaultMaxLabelLength     = 50
	DefaultMaxNameLength      = 128
	DefaultLabelEntropyLength = 24
	DefaultLabelEntropyBits   = 3.7
	DefaultSubdomainBudget    = 32
	DefaultEntropyMinLength   = 32
	DefaultEntropyBits        = 4.0
	DefaultMaxBytesPerDest    = ByteSize(256 << 20)
	DefaultResponseScanBytes  = ByteSize(1 << 20)
	defaultHostnameAction     = "block"
	defaultEntropyAction      = "log"
	defaultResponseScanAction = "annotate"
)

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
var Detectors = []string{"payment_card", "secret", "private_key", "jwt", "email", "phone", "iban", "us_ssn",
	"crypto_address", "crypto_private_key", "seed_phrase"}

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
		if len(in.Allow) == 0 && in.MCP.Tools.Allow == nil && in.MCP.Tools.Deny == nil {
			return fail(keyLine("intents"), "intent %q opens nothing: give it allow rules (or mcp tools lists)", name)
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
	if err := p.validateMCP(keyLine); err != nil {
		return err
	}
	return p.validateExfil(keyLine)
}

// validateExfil checks the hostnames, entropy, volume and responses sections and fills their
// defaults.
func (p *Profile) validateExfil(keyLine func(string) int) error {
	fail := func(key, format string, args ...any) error {
		return &PolicyError{File: p.file, Line: keyLine(key), Msg: key + ": " + fmt.Sprintf(format, args...)}
	}
	h := &p.Hostnames
	switch h.Action {
	case "":
		h.Action = defaultHostnameAction
	case "block", "log", "off":
	default:
		return fail("hostnames", "action %q, use block, log or off", h.Action)
	}
	if h.MaxLabelLength == 0 {
		h.MaxLabelLength = DefaultMaxLabelLength
	}
	if h.MaxNameLength == 0 {
		h.MaxNameLength = DefaultMaxNameLength
	}
	if h.EntropyMinLength == 0 {
		h.EntropyMinLength = DefaultLabelEntropyLength
	}
	if h.EntropyBits == 0 {
		h.EntropyBits = DefaultLabelEntropyBits
	}
	if h.MaxLabelLength < 1 || h.MaxLabelLength > 63 || h.MaxNameLength < 1 || h.MaxNameLength > 253 || h.EntropyMinLength < 8 || h.EntropyBits < 0 || h.EntropyBits > 8 {
		return fail("hostnames", "max_label_length 1..63, max_name_length 1..253, entropy_min_length at least 8, entropy_bits 0..8")
	}
	if h.SubdomainBudget == nil {
		n := DefaultSubdomainBudget
		h.SubdomainBudget = &n
	} else if *h.SubdomainBudget < 0 {
		return fail("hostnames", "subdomain_budget must not be negative (0 turns it off)")
	}
	for _, d := range h.Exempt {
		if err := checkDomain(d); err != nil {
			return fail("hostnames", "exempt %v", err)
		}
	}
	e := &p.Entropy
	switch e.Action {
	case "":
		e.Action = defaultEntropyAction
	case "block", "log", "off":
	default:
		return fail("entropy", "action %q, use log, block or off", e.Action)
	}
	if e.MinLength == 0 {
		e.MinLength = DefaultEntropyMinLength
	}
	if e.Bits == 0 {
		e.Bits = DefaultEntropyBits
	}
	if e.MinLength < 8 || e.Bits < 0 || e.Bits > 8 {
		return fail("entropy", "min_length at least 8, bits 0..8")
	}
	if p.Volume.MaxBytesPerDestination == nil {
		v := DefaultMaxBytesPerDest
		p.Volume.MaxBytesPerDestination = &v
	}
	r := &p.Responses
	switch r.Action {
	case "":
		r.Action = defaultResponseScanAction
	case "annotate", "log", "block", "off":
	default:
		return fail("responses", "action %q, use annotate, log, block or off", r.Action)
	}
	if r.MaxBytes == 0 {
		r.MaxBytes = DefaultResponseScanBytes
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
