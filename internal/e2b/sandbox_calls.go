package e2b

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// timeFormat is RFC 3339 with milliseconds in UTC: what JavaScript's Date reads, and of one
// length, so that the strings sort as the times do.
const timeFormat = "2006-01-02T15:04:05.000Z"

// clientID is E2B's deprecated clientID field, which the SDKs still require.
const clientID = "agentbox"

// create makes a sandbox: an agentbox session on the template's tier and image, with the envs,
// network and volumes asked for, and a timeout after which it is killed (or paused).
func (h *Handler) create(w http.ResponseWriter, r *http.Request, c *callCtx) {
	var req newSandbox
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	tpl, ok := h.templates[req.TemplateID]
	if !ok {
		h.fail(w, r, sandbox.Errorf(sandbox.KindNotFound, "template %q not found", req.TemplateID).
			WithHint("agentbox's E2B templates are %s; building templates is not implemented", strings.Join(h.templateNames(), ", ")))
		return
	}
	switch {
	case len(req.MCP) > 0:
		h.fail(w, r, e2bwire.NotImplemented("POST /v2/sandboxes with mcp (the MCP gateway of Sandbox.create({mcp}); agentbox hosts MCP servers at /mcp/servers/NAME)"))
		return
	case len(req.IAM) > 0:
		h.fail(w, r, e2bwire.NotImplemented("POST /v2/sandboxes with iam (workload identity tokens)"))
		return
	case len(req.Network) > 0:
		h.fail(w, r, e2bwire.NotImplemented("POST /v2/sandboxes with network (allowOut/denyOut rules; agentbox governs egress with its policy profiles)"))
		return
	}
	timeout, err := h.timeoutOf(req.Timeout, h.defTO)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	opts := sandbox.SessionOptions{Tier: tpl.Tier, Image: tpl.Image, Env: req.EnvVars,
		// E2B sandboxes reach the internet unless asked not to; agentbox's reach it through its
		// egress gateway, under the tenant's default profile.
		Network: req.AllowInternetAccess == nil || *req.AllowInternetAccess}
	if len(req.VolumeMounts) > 0 {
		opts.Volumes = map[string]string{}
		for _, m := range req.VolumeMounts {
			opts.Volumes[m.Name] = m.Path
		}
	}
	info, err := c.v.CreateSession(r.Context(), opts)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sandboxID, err := e2bwire.SandboxID(info.ID)
	if err != nil {
		_ = c.v.CloseSession(info.ID)
		h.fail(w, r, err)
		return
	}
	now := h.now()
	h.remember(&record{sessionID: info.ID, templateID: req.TemplateID, metadata: req.Metadata,
		startedAt: now, endAt: now.Add(timeout), autoPause: req.AutoPause != nil && *req.AutoPause,
		caller: c.id.Caller})
	writeJSON(w, http.StatusCreated, h.created(info.ID, sandboxID, req.TemplateID, c))
}

func (h *Handler) created(sessionID, sandboxID, templateID string, c *callCtx) sandboxCreated {
	return sandboxCreated{SandboxID: sandboxID, TemplateID: templateID, ClientID: clientID,
		EnvdVersion:        e2bwire.EnvdVersion,
		EnvdAccessToken:    h.tok.issue("envd", sessionID, c.id.KeyID),
		TrafficAccessToken: h.tok.issue("traffic", sessionID, c.id.KeyID)}
}

func (h *Handler) templateNames() []string {
	names := make([]string, 0, len(h.templates))
	for n := range h.templates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// session finds the caller's session of the path's sandbox; another tenant's is not found.
func (h *Handler) session(c *callCtx) (sandbox.SessionInfo, error) {
	sessionID, err := e2bwire.SessionID(c.sandboxID)
	if err != nil {
		return sandbox.SessionInfo{}, err
	}
	info, err := c.v.Session(sessionID)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return sandbox.SessionInfo{}, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", c.sandboxID).
			WithHint("it was killed, timed out, or belongs to another tenant; list yours with Sandbox.list()")
	}
	return info, err
}

func (h *Handler) listed(info sandbox.SessionInfo) listedSandbox {
	rec := h.recordOf(info)
	sandboxID, _ := e2bwire.SandboxID(info.ID)
	state := "running"
	if info.State == sandbox.SessionPaused {
		state = "paused"
	}
	md := rec.metadata
	if md == nil {
		md = map[string]string{}
	}
	end := rec.endAt
	if end.IsZero() {
		end = info.LastUsed.Add(info.IdleTimeout)
	}
	return listedSandbox{SandboxID: sandboxID, TemplateID: rec.templateID, Alias: rec.alias, ClientID: clientID,
		StartedAt: rec.startedAt.UTC().Format(timeFormat), EndAt: end.UTC().Format(timeFormat),
		CPUCount: 1, MemoryMB: info.Limits.MemoryBytes >> 20, Metadata: md, State: state,
		EnvdVersion: e2bwire.EnvdVersion, VolumeMounts: []volumeMount{}}
}

// get answers Sandbox.getInfo.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, c *callCtx) {
	info, err := h.session(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxDetail{listedSandbox: h.listed(info), AllowInternetAccess: info.Network})
}

// kill ends the sandbox's session.
func (h *Handler) kill(w http.ResponseWriter, r *http.Request, c *callCtx) {
	info, err := h.session(c)
	if err == nil {
		err = c.v.CloseSession(info.ID)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.forget(info.ID)
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout sets the sandbox's end to now + timeout, shorter or longer.
func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request, c *callCtx) {
	var body timeoutBody
	if err := decode(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if body.Timeout == nil {
		h.fail(w, r, sandbox.Errorf(sandbox.KindInvalidRequest, "timeout is required (seconds from now)"))
		return
	}
	h.endIn(w, r, c, body.Timeout, 0, false)
}

// refresh extends the sandbox's end to now + duration, never shortening it.
func (h *Handler) refresh(w http.ResponseWriter, r *http.Request, c *callCtx) {
	var body refreshBody
	if err := decode(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	h.endIn(w, r, c, body.Duration, h.defTO, true)
}

// endIn sets the sandbox's end to now + secs (def when nil), never shortening it when
// extendOnly, and answers 204: setTimeout and refresh.
func (h *Handler) endIn(w http.ResponseWriter, r *http.Request, c *callCtx, secs *int64, def time.Duration, extendOnly bool) {
	d, err := h.timeoutOf(secs, def)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.session(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.setEnd(info.ID, d, extendOnly, info)
	w.WriteHeader(http.StatusNoContent)
}

// pause pauses the session (agentbox's pause: its state to disk, its sandbox freed); a sandbox
// already paused is a 409, as E2B answers.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request, c *callCtx) {
	info, err := h.session(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if info.State == sandbox.SessionPaused {
		h.fail(w, r, sandbox.Errorf(sandbox.KindConflict, "sandbox %s is already paused", c.sandboxID))
		return
	}
	if _, err := c.v.Pause(r.Context(), info.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect answers Sandbox.connect: a paused sandbox is resumed (201), a running one is returned
// as it is (200); either way its end becomes at least now + timeout, and the caller gets access
// tokens of its own key.
func (h *Handler) connect(w http.ResponseWriter, r *http.Request, c *callCtx) {
	h.resumeOrConnect(w, r, c, false)
}

// resume answers the SDK v1's Sandbox.resume: like connect, but a running sandbox is a 409.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, c *callCtx) {
	h.resumeOrConnect(w, r, c, true)
}

func (h *Handler) resumeOrConnect(w http.ResponseWriter, r *http.Request, c *callCtx, onlyPaused bool) {
	var body timeoutBody
	if err := decode(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.timeoutOf(body.Timeout, h.defTO)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.session(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	switch {
	case info.State == sandbox.SessionPaused:
		if info, err = c.v.Resume(r.Context(), info.ID); err != nil {
			h.fail(w, r, err)
			return
		}
		status = http.StatusCreated
	case onlyPaused:
		h.fail(w, r, sandbox.Errorf(sandbox.KindConflict, "sandbox %s is already running", c.sandboxID))
		return
	}
	h.setEnd(info.ID, d, true, info)
	rec := h.recordOf(info)
	writeJSON(w, status, h.created(info.ID, c.sandboxID, rec.templateID, c))
}

// listV1 answers the SDK v1's list: running sandboxes, no pagination.
func (h *Handler) listV1(w http.ResponseWriter, r *http.Request, c *callCtx) {
	q := r.URL.Query()
	q.Set("state", "running")
	q.Set("limit", "100000")
	r.URL.RawQuery = q.Encode()
	h.listWith(w, r, c, 100000)
}

// list answers Sandbox.list: the caller's sandboxes (its tenant's sessions, whether E2B or
// agentbox's own API made them), filtered by metadata, state, template and start, ordered by
// start (newest first unless order=asc), a page of limit (default and at most 100) with the next
// page's token in X-Next-Token.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, c *callCtx) {
	h.listWith(w, r, c, 100)
}

func (h *Handler) listWith(w http.ResponseWriter, r *http.Request, c *callCtx, maxLimit int) {
	q := r.URL.Query()
	f, err := parseListFilter(q, maxLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var all []listedSandbox
	running := 0
	for _, info := range c.v.Sessions() {
		if _, err := e2bwire.SandboxID(info.ID); err != nil {
			continue
		}
		ls := h.listed(info)
		if ls.State == "running" {
			running++
		}
		if f.keep(ls) {
			all = append(all, ls)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].StartedAt != all[j].StartedAt {
			return (all[i].StartedAt < all[j].StartedAt) == f.asc
		}
		return (all[i].SandboxID < all[j].SandboxID) == f.asc
	})
	// The page starts after the cursor in the list's order, whether or not the sandbox it names
	// is still there or is this daemon's: a cluster's gateway merges the nodes' pages and hands
	// out the cursor of the last sandbox it listed, which every node reads the same way.
	start := 0
	if f.after != "" {
		start = len(all)
		for i, s := range all {
			if c := cursor(s); c > f.after == f.asc && c != f.after {
				start = i
				break
			}
		}
	}
	page := all[start:]
	if len(page) > f.limit {
		page = page[:f.limit]
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(cursor(page[len(page)-1]))))
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(running))
	if page == nil {
		page = []listedSandbox{}
	}
	writeJSON(w, http.StatusOK, page)
}

// cursor is a sandbox's place in a list: its start (of one length, see timeFormat) then its id,
// so that cursors sort as the list does.
func cursor(s listedSandbox) string { return s.StartedAt + " " + s.SandboxID }

// listFilter is the query of Sandbox.list.
type listFilter struct {
	metadata   map[string]string
	states     []string
	template   string
	startedAft time.Time
	asc        bool
	limit      int
	after      string
}

func parseListFilter(q url.Values, maxLimit int) (listFilter, error) {
	f := listFilter{limit: maxLimit}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return f, sandbox.Errorf(sandbox.KindInvalidRequest, "limit %q is not a positive number", s)
		}
		f.limit = min(n, maxLimit)
	}
	if s := q.Get("nextToken"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return f, sandbox.Errorf(sandbox.KindInvalidRequest, "nextToken %q is not a token this daemon gave", s)
		}
		f.after = string(b)
	}
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		f.asc = true
	default:
		return f, sandbox.Errorf(sandbox.KindInvalidRequest, "order %q: use asc or desc", o)
	}
	for _, s := range q["state"] {
		for _, st := range strings.Split(s, ",") {
			if st != "running" && st != "paused" {
				return f, sandbox.Errorf(sandbox.KindInvalidRequest, "state %q: use running or paused", st)
			}
			f.states = append(f.states, st)
		}
	}
	f.template = q.Get("template")
	if s := q.Get("startedAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return f, sandbox.Errorf(sandbox.KindInvalidRequest, "startedAfter %q is not an RFC 3339 time", s)
		}
		f.startedAft = t
	}
	// metadata is "k=v&k2=v2" as URLSearchParams writes it, of keys and values the SDK has
	// URI-encoded once more.
	if s := q.Get("metadata"); s != "" {
		pairs, err := url.ParseQuery(s)
		if err != nil {
			return f, sandbox.Errorf(sandbox.KindInvalidRequest, "metadata %q is not key=value pairs joined by &", s)
		}
		f.metadata = map[string]string{}
		for k, vs := range pairs {
			dk, err1 := url.QueryUnescape(k)
			dv, err2 := url.QueryUnescape(vs[len(vs)-1])
			if err1 != nil || err2 != nil {
				dk, dv = k, vs[len(vs)-1]
			}
			f.metadata[dk] = dv
		}
	}
	return f, nil
}

func (f listFilter) keep(s listedSandbox) bool {
	if len(f.states) > 0 && !slices.Contains(f.states, s.State) {
		return false
	}
	if f.template != "" && s.TemplateID != f.template {
		return false
	}
	if !f.startedAft.IsZero() {
		if t, err := time.Parse(time.RFC3339Nano, s.StartedAt); err == nil && !t.After(f.startedAft) {
			return false
		}
	}
	for k, v := range f.metadata {
		if s.Metadata[k] != v {
			return false
		}
	}
	return true
}
