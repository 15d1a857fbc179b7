package webui

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Steps is what the console calls for a session's steps, on the engine as the caller sees it (a
// *sandbox.View): the step tree, one step, what a step held and what changed from its parent, and
// the changes a person may ask for (rewind, fork, pause, resume). Inspections name a code context
// ("" the main one).
type Steps interface {
	Steps(id string) ([]sandbox.Step, string, error)
	Step(id, step string) (sandbox.Step, error)
	InspectStepIn(ctx context.Context, id, step, codeContext string) (sandbox.Inspection, error)
	DiffStepsIn(ctx context.Context, id, from, to, codeContext string) (sandbox.StepDiff, error)
	Rewind(ctx context.Context, id, step string) (sandbox.Step, error)
	Fork(ctx context.Context, id, step string) (sandbox.SessionInfo, error)
	Pause(ctx context.Context, id string) (sandbox.SessionInfo, error)
	Resume(ctx context.Context, id string) (sandbox.SessionInfo, error)
}

// Interface guards.
var _ Steps = (*sandbox.View)(nil)

// inspectBound bounds what a step page waits for its inspections (each forks the step into a
// throwaway sandbox and runs a bounded script there; the core bounds each run too).
const inspectBound = 40 * time.Second

// stepPage shows one step: its code, output, figures, variables and files, what changed from its
// parent, the audit records of its run, and the rewind and fork buttons.
func (u *UI) stepPage(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "a step's page", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	id, stepID := r.PathValue("id"), r.PathValue("step")
	info, err := c.view.Session(id)
	if err != nil {
		u.fail(w, r, c, "session", err)
		return
	}
	steps, head, err := c.view.Steps(id)
	if err != nil {
		u.fail(w, r, c, "steps", err)
		return
	}
	i := slices.IndexFunc(steps, func(s sandbox.Step) bool { return s.ID == stepID })
	if i < 0 {
		u.fail(w, r, c, "step", sandbox.Errorf(sandbox.KindNotFound, "session %s has no step %q", id, stepID))
		return
	}
	st := steps[i]
	data := map[string]any{"Session": u.row(c, info), "Step": st, "Head": st.ID == head, "Outcome": outcome(st),
		"Flash": r.URL.Query().Get("done")}
	for _, s := range steps {
		if s.ID == st.Parent {
			data["Parent"] = s
		}
	}
	var kids []sandbox.Step
	for _, s := range steps {
		if s.Parent == st.ID {
			kids = append(kids, s)
		}
	}
	data["Children"] = kids
	var figures, others []sandbox.Artifact
	for _, a := range st.Artifacts {
		if strings.HasPrefix(a.MIME, "image/") && a.MIME != "image/svg+xml" {
			figures = append(figures, a)
		} else {
			others = append(others, a)
		}
	}
	data["Figures"], data["Files"] = figures, others

	// The code contexts the step has (those a run up to it named, besides the main one) and the
	// one whose variables the page shows: ?context= (empty: the main one), else the context
	// the step's own run ran in, whose variables are the ones it changed.
	byID := make(map[string]*sandbox.Step, len(steps))
	for i := range steps {
		byID[steps[i].ID] = &steps[i]
	}
	lookup := func(id string) *sandbox.Step { return byID[id] }
	contexts := sandbox.StepContexts(lookup, st.ID)
	codeContext := st.Context
	if q := r.URL.Query(); q.Has("context") {
		codeContext = q.Get("context")
	}
	data["Contexts"], data["Context"] = contexts, codeContext
	data["ContextNew"] = codeContext != "" && st.Parent != "" && !slices.Contains(sandbox.StepContexts(lookup, st.Parent), codeContext)

	// What the step held and what changed from its parent, read at once in throwaway forks.
	ctx, cancel := context.WithTimeout(r.Context(), inspectBound)
	defer cancel()
	var wg sync.WaitGroup
	var ins sandbox.Inspection
	var diff sandbox.StepDiff
	var insErr, diffErr error
	row := data["Session"].(sessionRow)
	if row.Can.Snapshot {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ins, insErr = u.inspections.inspect(ctx, c.view, id, st.ID, codeContext)
		}()
	}
	// A context the parent did not have yet has nothing to compare with: all of it is new.
	if row.Can.Snapshot && st.Parent != "" && !data["ContextNew"].(bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			diff, diffErr = u.inspections.diff(ctx, c.view, id, st.Parent, st.ID, codeContext)
		}()
	}
	// The audit records of the step's run: by their ids, which the step keeps (the records
	// written for the session while it ran, its egress among them). A step recorded before
	// steps kept them shows the session's records from its start to the next step's (a
	// session's runs do not overlap), the last step's window closing 2 s after its run.
	f := sandbox.AuditFilter{Session: id, Seqs: st.AuditRecords, Limit: 200}
	if len(st.AuditRecords) == 0 {
		until := st.Started.Add(st.Took).Add(2 * time.Second)
		if i+1 < len(steps) && steps[i+1].Started.Before(until) {
			until = steps[i+1].Started
		}
		f.Since, f.Until = st.Started, until
	}
	if c.id.Has(auth.ScopeAuditRead) {
		recs, err := u.records(r.Context(), c, f)
		if err == nil {
			data["Records"] = recs
		}
		data["CanAudit"] = true
	}
	wg.Wait()
	data["Inspection"], data["InspectErr"] = ins, problem(insErr)
	data["Diff"], data["DiffErr"] = diff, problem(diffErr)
	// A context the step does not have, or a name that is none, is the page's own error (the
	// core's typed one, shown in its place), not the step's: the page answers with its status.
	status := http.StatusOK
	if codeContext != "" && insErr != nil && !slices.Contains(contexts, codeContext) {
		switch k := sandbox.KindOf(insErr); k {
		case sandbox.KindNotFound, sandbox.KindInvalidRequest, sandbox.KindNotImplemented:
			status = apiwire.StatusOf(k)
		}
	}
	u.render(w, r, status, "step", c, data)
}

// problem words an inspection's failure for the page (why the step cannot be read).
func problem(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if e := sandbox.AsError(err); e != nil && e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// rewind makes the session go back to a step; the person lands on the timeline, where the next
// run will open a branch from that step.
func (u *UI) rewind(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "rewinding a session", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	id, step := r.PathValue("id"), r.PostFormValue("step")
	st, err := c.view.Rewind(r.Context(), id, step)
	if err != nil {
		u.fail(w, r, c, "rewind", err)
		return
	}
	http.Redirect(w, r, "/ui/sessions/"+id+"?done="+url.QueryEscape("rewound to step "+itoa(st.Seq)+"; the next run goes on from it"), http.StatusSeeOther)
}

// fork starts a new session from a step and shows it.
func (u *UI) fork(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "forking a session", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	id, step := r.PathValue("id"), r.PostFormValue("step")
	info, err := c.view.Fork(r.Context(), id, step)
	if err != nil {
		u.fail(w, r, c, "fork", err)
		return
	}
	http.Redirect(w, r, "/ui/sessions/"+info.ID+"?done="+url.QueryEscape("forked from "+id+" at step "+step), http.StatusSeeOther)
}

// pause frees a session's sandbox; resume brings it back.
func (u *UI) pause(w http.ResponseWriter, r *http.Request, c *call) {
	u.pauseOrResume(w, r, c, "pause", c.view.Pause)
}

func (u *UI) resume(w http.ResponseWriter, r *http.Request, c *call) {
	u.pauseOrResume(w, r, c, "resume", c.view.Resume)
}

func (u *UI) pauseOrResume(w http.ResponseWriter, r *http.Request, c *call, what string, do func(context.Context, string) (sandbox.SessionInfo, error)) {
	if err := allows(c, what+" a session", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	id := r.PathValue("id")
	if _, err := do(r.Context(), id); err != nil {
		u.fail(w, r, c, what, err)
		return
	}
	http.Redirect(w, r, "/ui/sessions/"+id+"?done="+url.QueryEscape(what+"d"), http.StatusSeeOther)
}

// inspections keeps what steps held: a step's state never changes, so its inspection (a fork
// and a script run) is read once. Bounded; the oldest goes first.
type inspections struct {
	mu    sync.Mutex
	ins   map[string]sandbox.Inspection
	diffs map[string]sandbox.StepDiff
	order []string
}

const maxInspections = 64

func newInspections() *inspections {
	return &inspections{ins: map[string]sandbox.Inspection{}, diffs: map[string]sandbox.StepDiff{}}
}

// inspect reads a step's code context ("" the main one) through view (so the caller's
// ownership holds on every call, cached or not: the cache is consulted only after the view
// answered Step).
func (c *inspections) inspect(ctx context.Context, view Steps, id, step, codeContext string) (sandbox.Inspection, error) {
	if _, err := view.Step(id, step); err != nil {
		return sandbox.Inspection{}, err
	}
	k := id + "/" + step + "?" + codeContext
	c.mu.Lock()
	v, ok := c.ins[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := view.InspectStepIn(ctx, id, step, codeContext)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	c.ins[k] = v
	c.keep(k)
	c.mu.Unlock()
	return v, nil
}

func (c *inspections) diff(ctx context.Context, view Steps, id, from, to, codeContext string) (sandbox.StepDiff, error) {
	if _, err := view.Step(id, to); err != nil {
		return sandbox.StepDiff{}, err
	}
	k := id + "/" + from + ".." + to + "?" + codeContext
	c.mu.Lock()
	v, ok := c.diffs[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := view.DiffStepsIn(ctx, id, from, to, codeContext)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	c.diffs[k] = v
	c.keep(k)
	c.mu.Unlock()
	return v, nil
}

// keep remembers k's age and drops the oldest past the bound. c.mu is held.
func (c *inspections) keep(k string) {
	c.order = append(c.order, k)
	for len(c.order) > maxInspections {
		old := c.order[0]
		c.order = c.order[1:]
		delete(c.ins, old)
		delete(c.diffs, old)
	}
}

// outputHTML serves the HTML a step's run displayed (a DataFrame's table, as a notebook shows
// it), for the step page's frame. It is the code's markup, so it is served as a document of its
// own that can do nothing: a sandboxed frame (no script, no forms, an opaque origin), no
// resource may load, only inline style applies, and only this console may frame it.
func (u *UI) outputHTML(w http.ResponseWriter, r *http.Request, c *call) {
	if err := allows(c, "a step's output", scopeSessions...); err != nil {
		u.forbidden(w, r, c, err)
		return
	}
	id, stepID := r.PathValue("id"), r.PathValue("step")
	st, err := c.view.Step(id, stepID)
	if err != nil {
		u.fail(w, r, c, "step", err)
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || n >= len(st.Outputs) || st.Outputs[n].HTML == "" {
		u.errorPage(w, r, c, http.StatusNotFound, "No such output", "The step has no HTML output "+r.PathValue("n")+".")
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox; frame-ancestors 'self'")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "private, max-age=3600")
	_, _ = io.WriteString(w, outputDocHead+st.Outputs[n].HTML+"</body></html>")
}

// outputDocHead opens the document a displayed output is served in.
const outputDocHead = `<!doctype html><html><head><meta charset="utf-8"><style>` +
	`body{margin:0.5rem;font:13px system-ui,sans-serif}table{border-collapse:collapse}` +
	`th,td{padding:0.2rem 0.5rem;border-bottom:1px solid #e3e3e3;text-align:right}</style></head><body>`
