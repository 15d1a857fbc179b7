package egress

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/dlp"
)

// DLPInspector is the DLP stage backed by package dlp: one scanner per profile's DLP settings,
// built on first use and rebuilt when the profiles are reloaded.
type DLPInspector struct {
	mu       sync.Mutex
	scanners map[*DLP]*dlp.Scanner
}

// Interface guards.
var _ Inspector = (*DLPInspector)(nil)

// NewDLPInspector returns the DLP stage.
func NewDLPInspector() *DLPInspector { return &DLPInspector{scanners: map[*DLP]*dlp.Scanner{}} }

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

// Check builds the scanner of a profile, so a policy whose custom pattern does not compile is
// refused when it is loaded, not at its first request.
func (d *DLPInspector) Check(p *Profile) error {
	_, err := d.scanner(&p.DLP)
	if err != nil {
		return fmt.Errorf("profile %s: dlp: %w", p.Name, err)
	}
	return nil
}

func (d *DLPInspector) scanner(cfg *DLP) (*dlp.Scanner, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.scanners[cfg]; ok {
		return s, nil
	}
	s, err := dlp.New(dlpConfig(cfg))
	if err != nil {
		return nil, err
	}
	if len(d.scanners) > 64 { // profiles were reloaded many times: drop the old ones
		clear(d.scanners)
	}
	d.scanners[cfg] = s
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
	res := DLPResult{Reason: v.Reason}
	switch v.Action {
	case dlp.ActionLog, dlp.ActionRedact, dlp.ActionBlock:
		res.Action = string(v.Action)
	}
	seen := map[string]bool{}
	for _, f := range v.Findings {
		name := f.Detector
		if f.Rule != "" && (f.Detector == dlp.DetectorSecret || f.Detector == dlp.DetectorCustom) {
			name += ":" + f.Rule
		}
		if !seen[name] {
			seen[name] = true
			res.Detectors = append(res.Detectors, name)
		}
	}
	if res.Reason == "" && v.Unscanned != "" {
		res.Reason = "not scanned: " + v.Unscanned
	}
	res.Redacted = apply && v.Action == dlp.ActionRedact
	return res, nil
}
