package e2b

import (
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// record is what E2B knows of a sandbox that an agentbox session does not: its template, alias,
// metadata and timeout (kept in Options.StateFile, store.go). A session without one (made through
// agentbox's own API) is a sandbox too, with the template its tier names, no metadata and its idle
// timeout as its end.
type record struct {
	sessionID  string
	templateID string
	alias      string
	metadata   map[string]string
	startedAt  time.Time
	// endAt is when the timeout ends the sandbox; zero once it has been paused by its timeout,
	// until connect sets a new one.
	endAt     time.Time
	autoPause bool
	// caller made the sandbox; the reaper ends it as that caller (the audit log says who).
	caller sandbox.Caller
}

func (h *Handler) remember(rec *record) {
	h.mu.Lock()
	h.sandboxes[rec.sessionID] = rec
	h.mu.Unlock()
	h.save()
}

func (h *Handler) forget(sessionID string) {
	h.mu.Lock()
	_, ok := h.sandboxes[sessionID]
	delete(h.sandboxes, sessionID)
	h.mu.Unlock()
	if ok {
		h.save()
	}
}

// recordOf returns a copy of the record of a session, or one made from the session alone (a
// session created through agentbox's own API, or before a restart).
func (h *Handler) recordOf(info sandbox.SessionInfo) record {
	h.mu.Lock()
	rec, ok := h.sandboxes[info.ID]
	var out record
	if ok {
		out = *rec
	}
	h.mu.Unlock()
	if ok {
		return out
	}
	return record{sessionID: info.ID, templateID: h.templateOf(info), startedAt: info.CreatedAt,
		endAt: info.LastUsed.Add(info.IdleTimeout)}
}

// templateOf names the template of a session E2B did not create: the first template of its tier
// and image, else "agentbox-<tier>".
func (h *Handler) templateOf(info sandbox.SessionInfo) string {
	best := ""
	for name, t := range h.templates {
		if t.Tier == info.Tier && (best == "" || name < best) {
			best = name
		}
	}
	if best == "" {
		return "agentbox-" + string(info.Tier)
	}
	return best
}

// setEnd sets a sandbox's end to now+d; with extendOnly, only when that is later than its end.
func (h *Handler) setEnd(sessionID string, d time.Duration, extendOnly bool, info sandbox.SessionInfo) {
	defer h.save()
	end := h.now().Add(d)
	h.mu.Lock()
	defer h.mu.Unlock()
	rec, ok := h.sandboxes[sessionID]
	if !ok {
		r := h.recordOfLocked(info)
		rec = &r
		h.sandboxes[sessionID] = rec
	}
	if extendOnly && !rec.endAt.IsZero() && rec.endAt.After(end) {
		return
	}
	rec.endAt = end
}

func (h *Handler) recordOfLocked(info sandbox.SessionInfo) record {
	return record{sessionID: info.ID, templateID: h.templateOf(info), startedAt: info.CreatedAt,
		caller: sandbox.Caller{Tenant: info.Tenant, Agent: info.Agent}}
}

// expired returns copies of the records whose timeout has passed; those that pause are marked
// as done with their timeout, the others are forgotten once ended.
func (h *Handler) expired() []record {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []record
	for _, rec := range h.sandboxes {
		if rec.endAt.IsZero() || now.Before(rec.endAt) {
			continue
		}
		out = append(out, *rec)
		if rec.autoPause {
			rec.endAt = time.Time{}
		}
	}
	if len(out) > 0 {
		go h.save() // not under h.mu, which save takes
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// jsonEscape escapes s for a JSON string (sandbox ids are checked DNS labels or arbitrary text
// from a header).
func jsonEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
