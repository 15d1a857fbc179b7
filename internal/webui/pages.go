package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The scopes of the console's pages, as the HTTP API's routes have them.
var (
	scopeSessions  = []auth.Scope{auth.ScopeSessions}
	scopeArtifacts = []auth.Scope{auth.ScopeRun, auth.ScopeSessions}
	scopeAudit     = []auth.Scope{auth.ScopeAuditRead}
)

// forbidden answers a page whose scope the key lacks, naming it as /v1 would.
func (u *UI) forbidden(w http.ResponseWriter, r *http.Request, c *call, err error) {
	msg := err.Error()
	if e := sandbox.AsError(err); e != nil && e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	u.errorPage(w, r, c, http.StatusForbidden, "Not allowed", msg)
}

// fail answers an engine error: not found as such, the rest as an internal error whose detail
// goes to the log only.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, c *call, what string, err error) {
	switch k := sandbox.KindOf(err); k {
	case sandbox.KindNotFound:
		u.errorPage(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No %s here: %v.", what, err))
	case sandbox.KindInternal:
		u.log.Error("web console: "+what, "path", r.URL.Path, "err", err)
		u.errorPage(w, r, c, http.StatusInternalServerError, "Internal error", "The "+what+" could not be read; the daemon's log says why.")
	default:
		msg := err.Error()
		if e := sandbox.AsError(err); e != nil && e.Hint != "" {
			msg += " (" + e.Hint + ")"
		}
		u.errorPage(w, r, c, apiwire.StatusOf(k), "Could not "+what, msg)
	}
}

// sessionRow is one session in the sessions table.
type sessionRow struct {
	sandbox.SessionInfo
	State string
	Steps int
	// Can says which time-travel abilities the session's tier has (the buttons its pages show).
	Can sandbox.Capabilities
	// ForkSession and ForkStep are where a forked session came from (ForkedFrom, "session/step").
	ForkSession, ForkStep string
}

func (u *UI) sessionsPage(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "the sessions page", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	infos := c.view.Sessions()
	if u.opts.Others != nil {
		// A cluster's node: the sessions other nodes hold too, each once, in the order they began.
		here := make(map[string]bool, len(infos))
		for _, s := range infos {
			here[s.ID] = true
		}
		for _, s := range u.opts.Others(r.Context(), c.id.Caller) {
			if !here[s.ID] {
				infos = append(infos, s)
			}
		}
		slices.SortStableFunc(infos, func(a, b sandbox.SessionInfo) int { return a.CreatedAt.Compare(b.CreatedAt) })
	}
	rows := make([]sessionRow, 0, len(infos))
	for _, s := range slices.Backward(infos) { // newest first
		rows = append(rows, u.row(c, s))
	}
	u.render(w, r, http.StatusOK, "sessions", c, map[string]any{"Sessions": rows, "Now": u.opts.Now()})
}

// row describes a session for a table: its state and number of steps.
func (u *UI) row(c *call, s sandbox.SessionInfo) sessionRow {
	state := string(s.State)
	if state == "" {
		state = string(sandbox.SessionLive)
	}
	row := sessionRow{SessionInfo: s, State: state, Steps: s.Steps}
	row.ForkSession, row.ForkStep, _ = strings.Cut(s.ForkedFrom, "/")
	if rt, ok := c.view.Runtime(s.Tier); ok {
		row.Can = rt.Capabilities()
	}
	return row
}

func (u *UI) sessionPage(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "a session's page", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	info, err := c.view.Session(r.PathValue("id"))
	if err != nil {
		u.fail(w, r, c, "session", err)
		return
	}
	data := map[string]any{"Session": u.row(c, info), "Flash": r.URL.Query().Get("done")}
	steps, head, err := c.view.Steps(info.ID)
	if err != nil {
		u.fail(w, r, c, "steps", err)
		return
	}
	// A page draws the latest maxTimeline steps; the tree above them is cut (their parents
	// show as roots), and the page says how many were left out.
	if n := len(steps) - maxTimeline; n > 0 {
		steps, data["Hidden"] = steps[n:], n
	}
	data["Timeline"] = layoutTimeline(info.ID, steps, head)
	if c.id.Has(auth.ScopeAuditRead) {
		recs, err := u.records(r.Context(), c, sandbox.AuditFilter{Session: info.ID, Limit: 200})
		if err != nil {
			u.fail(w, r, c, "audit log", err)
			return
		}
		data["Records"] = recs
	}
	u.render(w, r, http.StatusOK, "session", c, data)
}

// artifact serves an artifact (a figure) from the artifact store as the caller sees it. Images
// the browser draws are shown inline; anything else is a download. Either way the answer has a
// policy that lets it run nothing.
func (u *UI) artifact(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "an artifact", scopeArtifacts...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	a, rc, err := c.view.Artifact(r.PathValue("id"))
	if err != nil {
		u.fail(w, r, c, "artifact", err)
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	switch a.MIME {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		h.Set("Content-Type", a.MIME)
	default:
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", "attachment; filename="+strconv.Quote(safeName(a.Name)))
	}
	http.ServeContent(w, r, "", time.Time{}, rc)
}

// safeName keeps a download's name to plain characters.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
	if s == "" {
		return "artifact"
	}
	return s
}

// record is an audit record as a table row shows it.
type record struct {
	api.AuditRecord
	What string
	Bad  bool
}

// records reads audit records as the caller sees them, newest first.
func (u *UI) records(ctx context.Context, c *call, f sandbox.AuditFilter) ([]record, error) {
	raw, err := c.view.QueryAudit(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]record, 0, len(raw))
	for _, line := range slices.Backward(raw) {
		var rec api.AuditRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			continue // the verifier reports a line that does not parse; the table skips it
		}
		what, bad := summarize(rec)
		out = append(out, record{AuditRecord: rec, What: what, Bad: bad})
	}
	return out, nil
}

// summarize says in a line what a record is about, and whether it is a refusal or a failure.
func summarize(r api.AuditRecord) (string, bool) {
	bad := r.Decision == "deny" || r.Decision == "block"
	switch {
	case r.Run != nil:
		s := fmt.Sprintf("%s run, %s in %.1f ms, code %s (%d bytes)", r.Run.Tier, r.Run.Outcome, r.Run.DurationMS, short(r.Run.CodeSHA256, 12), r.Run.CodeBytes)
		if r.Run.Exception != "" {
			s += ", raised " + r.Run.Exception
		}
		if r.Run.Error != "" {
			s += ": " + r.Run.Error
		}
		return s, bad || r.Run.Outcome == "error"
	case r.Egress != nil:
		s := fmt.Sprintf("%s %s → %s", r.Egress.Method, r.Egress.URL, r.Egress.Decision)
		if r.Egress.Status != 0 {
			s += fmt.Sprintf(" (%d)", r.Egress.Status)
		}
		if r.Egress.Reason != "" {
			s += ": " + r.Egress.Reason
		}
		return s, bad || r.Egress.Decision != "allowed" && r.Egress.Decision != "warned"
	case r.Lifecycle != nil:
		l := r.Lifecycle
		switch {
		case r.Kind == "session.create":
			s := l.Tier + " session"
			if l.Image != "" {
				s += ", image " + l.Image
			}
			if l.Network {
				s += ", network (" + l.EgressProfile + ")"
			}
			if l.Error != "" {
				s += ": " + l.Error
			}
			return s, bad
		case r.Kind == "session.close" || r.Kind == "session.expire":
			return fmt.Sprintf("%s after %d runs, %s", l.Reason, l.Runs, duration(time.Duration(l.AgeMS*float64(time.Millisecond)))), bad
		default: // rewind, fork, pause, resume: the reason names the step
			s := l.Reason
			if l.Error != "" {
				s += ": " + l.Error
			}
			return s, bad
		}
	case r.Alert != nil:
		return r.Alert.Source + ": " + r.Alert.Message, true
	case r.Policy != nil:
		s := r.Policy.Summary
		if r.Policy.Error != "" {
			s += ": " + r.Policy.Error
		}
		return s, bad || r.Policy.Error != ""
	case r.MCP != nil:
		s := r.MCP.Server
		if r.MCP.Tool != "" {
			s += " · " + r.MCP.Tool
		}
		if r.MCP.Reason != "" {
			s += ": " + r.MCP.Reason
		}
		return s, bad || r.Kind == "mcp.refused"
	case r.Restart != nil:
		return fmt.Sprintf("restarted after pid %d stopped uncleanly; %d sessions lost", r.Restart.PreviousPID, len(r.Restart.Sessions)), true
	case r.Repair != nil:
		return fmt.Sprintf("cut %d bytes at line %d: %s", r.Repair.Bytes, r.Repair.Line, r.Repair.Reason), true
	}
	return "", bad
}

// maxTimeline bounds the steps a session's page draws.
const maxTimeline = 500

// The audit page's filters and their bounds.
const (
	auditPageLimit = 100
	auditMaxLimit  = 1000
)

func (u *UI) auditPage(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "the audit log", scopeAudit...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	q := r.URL.Query()
	f := sandbox.AuditFilter{
		Session: strings.TrimSpace(q.Get("session")), Kind: strings.TrimSpace(q.Get("kind")),
		Decision: strings.TrimSpace(q.Get("decision")), Limit: auditPageLimit,
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n >= 1 {
		f.Limit = min(n, auditMaxLimit)
	}
	recs, err := u.records(r.Context(), c, f)
	if err != nil {
		u.fail(w, r, c, "audit log", err)
		return
	}
	alerts, err := u.records(r.Context(), c, sandbox.AuditFilter{Kind: "alert", Limit: 20})
	if err != nil {
		u.fail(w, r, c, "audit log", err)
		return
	}
	check, at, cerr := u.verify.get(r.Context(), false)
	u.render(w, r, http.StatusOK, "audit", c, map[string]any{
		"Records": recs, "Alerts": alerts, "Filter": f,
		"Check": check, "CheckedAt": at, "CheckErr": errText(cerr), "CanVerify": u.opts.VerifyAudit != nil,
		// The verifier reads the whole log, every tenant's records: a tenant's person sees
		// whether it holds and when it was last signed, the counts and problems only an admin.
		"Detail": c.id.Admin,
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// verifyNow checks the whole log again now.
func (u *UI) verifyNow(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "the audit log", scopeAudit...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	_, _, _ = u.verify.get(r.Context(), true)
	http.Redirect(w, r, "/ui/audit", http.StatusSeeOther)
}

// verifyCache keeps the last verification for a while: the verifier reads the whole log, and a
// page view should not cost that each time. The button on the audit page checks again at once.
type verifyCache struct {
	check func(context.Context) (AuditCheck, error)
	now   func() time.Time

	mu   sync.Mutex
	last *AuditCheck
	err  error
	at   time.Time
}

// verifyFresh is how long a verification is shown before a page view checks again.
const verifyFresh = 30 * time.Second

// get returns the last check (nil when there is no verifier) and when it ran; force checks again.
func (v *verifyCache) get(ctx context.Context, force bool) (*AuditCheck, time.Time, error) {
	if v.check == nil {
		return nil, time.Time{}, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if force || v.at.IsZero() || v.now().Sub(v.at) > verifyFresh {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		c, err := v.check(ctx)
		v.last, v.err, v.at = &c, err, v.now()
		if err != nil {
			v.last = nil
		}
	}
	return v.last, v.at, v.err
}
