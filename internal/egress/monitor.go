package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Alert is raised when a session's violations reach its profile's threshold within the window.
type Alert struct {
	Time       time.Time `json:"time"`
	Session    string    `json:"session"`
	Profile    string    `json:"profile"`
	Violations int       `json:"violations"`
	Window     string    `json:"window"`
	// Last is the violation that raised the alert.
	Last Event `json:"last"`
	// Ended says the session was ended because of it.
	Ended bool `json:"ended"`
	// Source is the gate that found the violations: "egress" (this gateway) or what reported
	// them to Violation ("mcp").
	Source string `json:"source"`
}

// monitor counts violations per session in a sliding window.
type monitor struct {
	g  *Gateway
	mu sync.Mutex
	// times of recent violations, per session
	recent map[string][]time.Time
	hc     *http.Client
	counts int // calls of count, for the periodic sweep
}

func newMonitor(g *Gateway) *monitor {
	return &monitor{g: g, recent: map[string][]time.Time{}, hc: &http.Client{Timeout: 5 * time.Second}}
}

func (m *monitor) forget(session string) {
	m.mu.Lock()
	delete(m.recent, session)
	m.mu.Unlock()
}

// count adds a violation and raises an alert at the threshold. The counter restarts after an
// alert, so a session that keeps violating raises one alert per threshold violations.
func (m *monitor) count(sb Sandbox, p *Profile, ev Event, source string, endable bool) {
	a := p.Alerts
	if a.Threshold <= 0 || sb.Session == "" {
		return
	}
	now := time.Now()
	window := time.Duration(a.Window)
	m.mu.Lock()
	// One-shot runs are never forgotten by a session close: drop every session whose last
	// violation left the window, now and then, so the map stays bounded.
	if m.counts++; m.counts%256 == 0 {
		stale := max(window, time.Hour) // other profiles may have longer windows
		for s, ts := range m.recent {
			if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= stale {
				delete(m.recent, s)
			}
		}
	}
	ts := m.recent[sb.Session]
	keep := ts[:0]
	for _, t := range ts {
		if now.Sub(t) < window {
			keep = append(keep, t)
		}
	}
	keep = append(keep, now)
	n := len(keep)
	if n >= a.Threshold {
		delete(m.recent, sb.Session)
	} else {
		m.recent[sb.Session] = keep
	}
	m.mu.Unlock()
	if n < a.Threshold {
		return
	}
	al := Alert{Time: now.UTC(), Session: sb.Session, Profile: p.Name, Violations: n, Window: window.String(), Last: ev, Source: source}
	al.Ended = endable && a.EndSession && p.Mode == ModeEnforce && m.g.opts.EndSession != nil
	m.g.stats.alert(al)
	m.g.log.Warn(source+" alert: repeated violations", "session", sb.Session, "profile", p.Name, "violations", n, "window", window, "ending_session", al.Ended, "last", ev.Reason)
	if m.g.opts.Recorder != nil {
		m.g.opts.Recorder.Alert(al)
	}
	if a.Webhook != "" {
		go m.post(a.Webhook, al)
	}
	if al.Ended {
		go m.g.opts.EndSession(sb.Session, fmt.Sprintf("%d %s violations within %v (profile %s): %s", n, source, window, p.Name, ev.Reason))
	}
}

// post sends an alert to a webhook. It runs from the daemon, not the sandbox: the webhook is the
// operator's, so it is not subject to the sandbox's policy.
func (m *monitor) post(url string, al Alert) {
	b, _ := json.Marshal(al)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		m.g.log.Error("egress alert webhook", "url", url, "err", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.hc.Do(req)
	if err != nil {
		m.g.log.Error("egress alert webhook", "url", url, "err", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		m.g.log.Error("egress alert webhook", "url", url, "status", resp.Status)
	}
}

// Violation counts a violation another gate found against sb's session, under the alerts of
// sb's profile, as the gateway counts its own: the governed calls of hosted MCP servers
// (internal/mcphost) report theirs here (a denied tool, arguments DLP blocked, refused tool
// definitions, a blocked description or result), so repeated violations raise the same alerts,
// reach the same webhook and the same audit log (Recorder.Alert, with source), and may end the
// session. ev describes the violation for the alert; it is redacted, and not recorded as an
// egress event (its gate records it). endable is false for what is not a session to end (a
// hosted server itself): its alert is raised, nothing is ended.
func (g *Gateway) Violation(sb Sandbox, ev Event, source string, endable bool) error {
	p, err := g.Profile(sb.Profile)
	if err != nil {
		return err
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	ev.Session, ev.Profile, ev.Mode = sb.Session, p.Name, p.Mode
	g.redactEvent(&ev, p)
	g.monitor.count(sb, p, ev, source, endable)
	return nil
}
