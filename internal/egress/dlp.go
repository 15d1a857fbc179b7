package egress

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/dlp"
)

// DLPInspector is the DLP stage backed by package dlp: one scanner per profile's DLP settings,
// built on first use and rebuilt when the profiles are reloaded, and one per profile for the
// redaction of records (every detector on).
type DLPInspector struct {
	mu        sync.Mutex
	scanners  map[*DLP]*dlp.Scanner
	redactors map[*DLP]*dlp.Scanner
}

// TextInspector is an Inspector that also scans texts outside a request's structure: host names
// before they are resolved, and the fields of a record before it is written.
type TextInspector interface {
	// InspectHost scans a host name, as sent, under cfg's detectors and actions (dlp's
	// ScanHost: labels decoded where they decode; a redact action blocks).
	InspectHost(name string, cfg *DLP) (TextResult, error)
	// InspectText scans another text (a host's labels joined, or decoded) the same way; where
	// names it in the reason ("the host name's labels joined").
	InspectText(where, text string, cfg *DLP) (TextResult, error)
	// FindInFields returns, per field, what any detector finds (every built-in detector, and
	// cfg's custom ones, whatever the profile's actions) with the token that replaces it
	// ([REDACTED:<name>]), and the detectors that found something.
	FindInFields(fields []string, cfg *DLP) ([][]Redaction, []string, error)
}

// Redaction is a span of a field to replace by Token.
type Redaction struct {
	Start, End int
	Token      string
}

// TextResult is what InspectText found.
type TextResult struct {
	// Action is the strongest action: "", log, redact or block.
	Action string
	// Reason says what was found where, never the value.
	Reason    string
	Detectors []string
	// Spans are the byte ranges [start, end) of the findings in text.
	Spans [][2]int
}

// Interface guards.
var (
	_ Inspector     = (*DLPInspector)(nil)
	_ TextInspector = (*DLPInspector)(nil)
)

// NewDLPInspector returns the DLP stage.
func NewDLPInspector() *DLPInspector {
	return &DLPInspector{scanners: map[*DLP]*dlp.Scanner{}, redactors: map[*DLP]*dlp.Scanner{}}
}

// dlpConfig turns a profile's settings into the scanner's. Profiles name detectors with
// underscores (payment_card); package dlp with hyphens (payment-card).
func dlpConfig(cfg *DLP) dlp.Config {
	c := dlp.Config{Actions: map[string]dlp.Action{}, MaxBodyBytes: cfg.MaxBodyBytes, Oversize: dlp.OversizePolicy(cfg.Oversize)}
	custom := map[string]bool{}
	for _, cd := range cfg.Custom {
		c.Custom = append(c.Custom, dlp.CustomDetector{Name: cd.Name, Pattern: cd.Pattern, Action: dlp.Action(cd.Action)})
		custom[cd.Name] = true
	}
	for det, a := range cfg.Actions {
		if custom[det] {
			continue // a custom detector carries its own action
		}
		name, rule, _ := strings.Cut(det, ":")
		name = strings.ReplaceAll(name, "_", "-")
		if rule != "" {
			name += ":" + rule
		}
		c.Actions[name] = dlp.Action(a)
	}
	return c
}

// DLPConfig is the DLP scanner configuration of the profile's dlp settings (actions, custom
// detectors, sizes), for another gate that scans under the profile (the hosted MCP servers'
// arguments).
func (p *Profile) DLPConfig() dlp.Config { return dlpConfig(&p.DLP) }

// redactConfig is the configuration of a profile's record redactor: every built-in detector and
// the profile's custom ones, all redacting, nothing decoded past the defaults.
func redactConfig(cfg *DLP) dlp.Config {
	c := dlp.Config{Actions: map[string]dlp.Action{}, Oversize: dlp.OversizeScanPrefix}
	for det := range dlp.DefaultActions() {
		c.Actions[det] = dlp.ActionRedact
	}
	for _, cd := range cfg.Custom {
		c.Custom = append(c.Custom, dlp.CustomDetector{Name: cd.Name, Pattern: cd.Pattern, Action: dlp.ActionRedact})
	}
	return c
}

// Check builds the scanner of a profile, so a policy whose custom pattern does not compile is
// refused when it is loaded, not at its first request.
func (d *DLPInspector) Check(p *Profile) error {
	if _, err := d.scanner(&p.DLP); err != nil {
		return fmt.Errorf("profile %s: dlp: %w", p.Name, err)
	}
	if _, err := d.redactor(&p.DLP); err != nil {
		return fmt.Errorf("profile %s: dlp (records): %w", p.Name, err)
	}
	return nil
}

func (d *DLPInspector) scanner(cfg *DLP) (*dlp.Scanner, error) {
	return d.cached(d.scanners, cfg, dlpConfig)
}

func (d *DLPInspector) redactor(cfg *DLP) (*dlp.Scanner, error) {
	return d.cached(d.redactors, cfg, redactConfig)
}

func (d *DLPInspector) cached(m map[*DLP]*dlp.Scanner, cfg *DLP, conf func(*DLP) dlp.Config) (*dlp.Scanner, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := m[cfg]; ok {
		return s, nil
	}
	s, err := dlp.New(conf(cfg))
	if err != nil {
		return nil, err
	}
	if len(m) > 64 { // profiles were reloaded many times: drop the old ones
		clear(m)
	}
	m[cfg] = s
	return s, nil
}

// Inspect scans r. When apply is false (warn mode) the scan runs on a copy, so the request goes
// out unchanged whatever the verdict.
func (d *DLPInspector) Inspect(r *http.Request, cfg *DLP, apply bool) (DLPResult, error) {
	if len(cfg.Actions) == 0 && len(cfg.Custom) == 0 {
		return DLPResult{}, nil
	}
	s, err := d.scanner(cfg)
	if err != nil {
		return DLPResult{}, err
	}
	target := r
	if !apply {
		target = r.Clone(r.Context())
		if r.Body != nil && r.Body != http.NoBody {
			// Read what the scanner may read (one byte more tells it the body is larger); the
			// original body gets the same bytes back, followed by the rest.
			buf, err := io.ReadAll(io.LimitReader(r.Body, cfg.MaxBodyBytes+1))
			if err != nil {
				return DLPResult{}, err
			}
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
			target.Body = io.NopCloser(bytes.NewReader(buf))
			if int64(len(buf)) <= cfg.MaxBodyBytes {
				target.ContentLength = int64(len(buf))
			}
		}
	}
	v, err := s.ScanRequest(target)
	if err != nil {
		return DLPResult{}, err
	}
	res := DLPResult{Reason: v.Reason, Detectors: detectorNames(v.Findings)}
	switch v.Action {
	case dlp.ActionLog, dlp.ActionRedact, dlp.ActionBlock:
		res.Action = string(v.Action)
	}
	if res.Reason == "" && v.Unscanned != "" {
		res.Reason = "not scanned: " + v.Unscanned
	}
	res.Redacted = apply && v.Action == dlp.ActionRedact
	return res, nil
}

// detectorNames lists the findings' detectors as the gateway records them ("secret:<rule>").
func detectorNames(fs []dlp.Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Action == dlp.ActionAllow || f.Action == "" {
			continue
		}
		name := f.Detector
		if f.Rule != "" && (f.Detector == dlp.DetectorSecret || f.Detector == dlp.DetectorCustom) {
			name += ":" + f.Rule
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// InspectHost scans a host name with the profile's scanner (dlp.Scanner.ScanHost).
func (d *DLPInspector) InspectHost(name string, cfg *DLP) (TextResult, error) {
	return d.inspect(cfg, func(s *dlp.Scanner) dlp.Verdict { return s.ScanHost(name) })
}

// InspectText scans a text (a host's labels joined, a decoded label) with the profile's scanner.
func (d *DLPInspector) InspectText(where, text string, cfg *DLP) (TextResult, error) {
	return d.inspect(cfg, func(s *dlp.Scanner) dlp.Verdict { return s.ScanBytes(where, []byte(text)) })
}

func (d *DLPInspector) inspect(cfg *DLP, scan func(*dlp.Scanner) dlp.Verdict) (TextResult, error) {
	if len(cfg.Actions) == 0 && len(cfg.Custom) == 0 {
		return TextResult{}, nil
	}
	s, err := d.scanner(cfg)
	if err != nil {
		return TextResult{}, err
	}
	v := scan(s)
	res := TextResult{Reason: v.Reason, Detectors: detectorNames(v.Findings)}
	switch v.Action {
	case dlp.ActionLog, dlp.ActionRedact, dlp.ActionBlock:
		res.Action = string(v.Action)
	}
	for _, f := range v.Findings {
		if f.Action != dlp.ActionAllow && f.Action != "" {
			res.Spans = append(res.Spans, [2]int{f.Offset, f.Offset + f.Length})
		}
	}
	return res, nil
}

// FindInFields scans the fields as one text (one line each) with every detector on, and returns
// each finding clipped to the field it falls in. It is dlp's RedactText in one pass over all the
// fields of a record, returning the spans rather than the text, so the caller can also take what
// was found in the URL out of the reason.
func (d *DLPInspector) FindInFields(fields []string, cfg *DLP) ([][]Redaction, []string, error) {
	s, err := d.redactor(cfg)
	if err != nil {
		return nil, nil, err
	}
	var b strings.Builder
	starts := make([]int, len(fields))
	for i, f := range fields {
		starts[i] = b.Len()
		b.WriteString(f)
		b.WriteByte('\n')
	}
	v := s.ScanBytes("record", []byte(b.String()))
	if len(v.Findings) == 0 {
		return nil, nil, nil
	}
	out := make([][]Redaction, len(fields))
	for _, f := range v.Findings {
		lo, hi := f.Offset, f.Offset+f.Length
		for i := range fields {
			fs, fe := starts[i], starts[i]+len(fields[i])
			if hi <= fs || lo >= fe {
				continue
			}
			out[i] = append(out[i], Redaction{max(lo, fs) - fs, min(hi, fe) - fs, f.Token()})
		}
	}
	return out, detectorNames(v.Findings), nil
}

// applyRedactions replaces the spans of s by their tokens; overlapping spans merge under the
// first one's token.
func applyRedactions(s string, rs []Redaction) string {
	if len(rs) == 0 {
		return s
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Redaction) int { return a.Start - b.Start })
	var b strings.Builder
	at := 0
	for _, r := range rs {
		if r.End <= at {
			continue
		}
		if r.Start < at {
			r.Start = at
		} else {
			b.WriteString(s[at:r.Start])
			b.WriteString(r.Token)
		}
		at = r.End
	}
	b.WriteString(s[at:])
	return b.String()
}
