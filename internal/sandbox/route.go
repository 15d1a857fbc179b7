package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Routing and fallback: where a request goes, by what the tiers offer (Capabilities) and what the
// router reads in the code, never by a tier's name.
//
//   - A request that asks for packages, an image or network goes to the first tier that gives
//     them. An explicit tier that does not give them is refused with a hint naming one that does.
//   - Otherwise the router ranks the tiers for the code; the request goes to the first ranked tier
//     whose capabilities fit its limits.
//   - An auto one-shot run whose tier reports, from the result, that the code needed what the tier
//     cannot give (Explainer: a module, a thread) runs again, once, in the next tier that gives it.

// orderRouter ranks the tiers in the Manager's order; it stands in while no code-reading router is
// configured.
type orderRouter struct{ tiers []Tier }

func (r orderRouter) Route(req *RunRequest) (Decision, error) {
	if req.Tier != "" && req.Tier != TierAuto {
		return Decision{Tier: req.Tier, Reasons: []string{string(req.Tier) + ": runtime requested"}}, nil
	}
	why := "the only tier this daemon runs"
	if len(r.tiers) > 1 {
		why = "the first of the tiers this daemon runs"
	}
	return Decision{Tier: r.tiers[0], Ranked: r.tiers, Reasons: []string{string(r.tiers[0]) + ": " + why}}, nil
}

// route picks the runtime of a request whose limits are already applied.
func (m *Manager) route(req *RunRequest) (Runtime, Decision, error) {
	wantsImage := len(req.Packages) > 0 || req.Image != ""
	if req.Tier != "" && req.Tier != TierAuto {
		t, ok := m.tier(req.Tier)
		if !ok {
			return nil, Decision{}, m.unknown(req.Tier)
		}
		if why := t.caps.misfit(req.Packages, req.Image, req.Network, Limits{}); why != "" {
			return nil, Decision{}, m.refuse(t.caps.Tier, why, req)
		}
		// A tier without images has a fixed set of modules, so the router can check an explicit
		// request for it against the code (an import it lacks fails before a sandbox starts). A
		// tier with images reads the code itself: its interpreter answers, syntax errors included.
		d := Decision{Tier: t.caps.Tier, Reasons: []string{string(t.caps.Tier) + ": runtime requested"}}
		if !t.caps.Images {
			var err error
			if d, err = m.router.Route(req); err != nil {
				return nil, d, err
			}
		}
		if why := t.caps.misfit(nil, "", false, req.Limits); why != "" && d.SyntaxError == nil {
			return nil, d, Errorf(KindInvalidRequest, "runtime %s cannot take this request: it %s", t.caps.Tier, why).
				WithHint("use runtime auto, or ask for less")
		}
		d.Tier = t.caps.Tier
		return t.rt, d, nil
	}
	if wantsImage || req.Network {
		what := imageReason(req.Packages, req.Image)
		if !wantsImage {
			what = "network requested (only " + tierList(m.tiersWith(func(c Capabilities) bool { return c.Network })) + " sandboxes have a way out)"
		}
		for _, t := range m.tiers {
			if t.caps.misfit(req.Packages, req.Image, req.Network, req.Limits) == "" {
				return t.rt, Decision{Tier: t.caps.Tier, Reasons: []string{string(t.caps.Tier) + ": " + what}}, nil
			}
		}
		return nil, Decision{}, Errorf(KindRuntimeUnavailable, "no runtime on this daemon takes this request (%s)", what).
			WithHint("this daemon runs %v", m.Tiers())
	}
	d, err := m.router.Route(req)
	if err != nil {
		return nil, d, err
	}
	if d.SyntaxError != nil {
		return nil, d, nil
	}
	ranked := d.Ranked
	if len(ranked) == 0 {
		ranked = []Tier{d.Tier}
	}
	var misfits []string
	for _, name := range ranked {
		t, ok := m.tier(name)
		if !ok {
			continue
		}
		why := t.caps.misfit(nil, "", false, req.Limits)
		if why == "" {
			if len(misfits) > 0 {
				d.Reasons = append(d.Reasons, string(name)+": "+strings.Join(misfits, "; "))
			}
			d.Tier, d.Ranked = name, ranked
			return t.rt, d, nil
		}
		misfits = append(misfits, fmt.Sprintf("%s %s", name, why))
	}
	if len(misfits) > 0 {
		return nil, d, Errorf(KindInvalidRequest, "no runtime on this daemon takes this request: %s", strings.Join(misfits, "; ")).
			WithHint("ask for less")
	}
	return nil, d, m.unknown(d.Tier)
}

// unknown answers a request for a tier this daemon does not run: unavailable here when this build
// has it (turned off, or this machine cannot run it), invalid when no build has it.
func (m *Manager) unknown(name Tier) error {
	if !slices.Contains(m.known, name) {
		return Errorf(KindInvalidRequest, "unknown runtime %q", name).
			WithHint("use one of %s", strings.Join(append([]string{string(TierAuto)}, tierStrings(m.known)...), ", "))
	}
	return Errorf(KindRuntimeUnavailable, "runtime %q is not available on this daemon", name).
		WithHint("this daemon runs %v", m.Tiers())
}

// refuse answers an explicit request for a tier that does not give what it asks (images, network),
// with a hint that names the tiers that do.
func (m *Manager) refuse(name Tier, why string, req *RunRequest) error {
	switch why {
	case misfitImages:
		return Errorf(KindInvalidRequest, "the %s runtime has no images or packages, and this request asks for %s", name, imageReason(req.Packages, req.Image)).
			WithHint("use runtime %s, or drop packages and image", m.instead(func(c Capabilities) bool { return c.Images }))
	case misfitNetwork:
		return Errorf(KindInvalidRequest, "the %s runtime never has network, and this request asks for it", name).
			WithHint("use runtime %s for network through the egress gateway", m.instead(func(c Capabilities) bool { return c.Network }))
	}
	return Errorf(KindInvalidRequest, "the %s runtime %s", name, why)
}

// instead names what a request could ask for: "heavy (or auto)", or "auto" alone when no tier of
// this daemon gives it.
func (m *Manager) instead(ok func(Capabilities) bool) string {
	if ts := m.tiersWith(ok); len(ts) > 0 {
		return tierList(ts) + " (or auto)"
	}
	return "auto"
}

// Route returns the decision Run would make for req, without running it.
func (m *Manager) Route(req *RunRequest) (Decision, error) {
	if err := m.policy.CheckRequest(req); err != nil {
		return Decision{}, err
	}
	limits, err := m.policy.Apply(req.Limits)
	if err != nil {
		return Decision{}, err
	}
	r := *req
	r.Limits = limits
	_, d, err := m.route(&r)
	return d, err
}

// Run runs one request in a fresh sandbox. In auto mode, a run whose
// tier reports that the code needed what it cannot give (a module an image has, a thread) is run
// again, once, in the next ranked tier that gives it (see retry).
func (m *Manager) Run(ctx context.Context, req *RunRequest) (res *Result, err error) {
	if err := m.policy.CheckRequest(req); err != nil {
		return nil, err
	}
	if req.Context != "" || req.ContextReset || req.ContextEnd {
		return nil, Errorf(KindInvalidRequest, "a one-shot run has no code contexts: contexts are a session's").
			WithHint("create a session (POST /v1/sessions) and run in its contexts")
	}
	c := CallerOf(ctx)
	limits, err := m.policy.Apply(m.tenantDefaults(c, req.Limits))
	if err != nil {
		return nil, err
	}
	r := *req
	r.Limits = limits
	if r.Tier == "" {
		r.Tier = TierAuto
	}
	if r.EgressProfile, err = m.checkTenant(c, r.Tier, r.Image, r.Network || len(r.Packages) > 0, r.EgressProfile, limits); err != nil {
		return nil, err
	}
	rt, d, err := m.route(&r)
	if err != nil {
		return nil, err
	}
	if _, err := m.checkTenant(c, d.Tier, "", false, "", Limits{}); err != nil {
		return nil, err
	}
	if d.SyntaxError != nil {
		// The code cannot run: answer with its error as the interpreter would, without a sandbox.
		e := *d.SyntaxError
		res := &Result{ExitCode: 1, Error: &e, Stderr: e.Traceback, Runtime: d.Tier}
		annotate(res, nil, d)
		m.log.Debug("run", "runtime", d.Tier, "routing", d.Reasons, "exit_code", 1)
		return res, nil
	}
	r.Tier = d.Tier
	r.ID = "run_" + newID()[3:]
	// Packages no image has are installed on demand through the gateway under the profile too
	// (the heavy tier's packages.go), so a request for packages gets one as a request for
	// network does.
	if (r.Network || len(r.Packages) > 0) && r.EgressProfile == "" {
		r.EgressProfile = DefaultEgressProfile
	}
	done, err := m.startRun(c, limits.MemoryBytes)
	if err != nil {
		return nil, err
	}
	if c.Tenant != "" {
		// Only a tenant's runs are looked up (TenantOf, for its egress budget): the daemon's own
		// runs take no lock for it.
		m.mu.Lock()
		m.running[r.ID] = c.Tenant
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			delete(m.running, r.ID)
			m.mu.Unlock()
		}()
	}
	defer func() { done(executed(res, err)) }()
	st := m.streamFor(req.Output, limits, c.Tenant)
	r = withStream(r, st)
	res, err = rt.Run(ctx, &r)
	if auto := req.Tier == "" || req.Tier == TierAuto; auto {
		if next, nd, ok := m.retry(rt, res, err, d); ok {
			h := r
			h.Tier = nd.Tier
			if spent := res.Timing.Total; spent > 0 && spent < h.Limits.Timeout {
				h.Limits.Timeout -= spent // the retry has what the first try left of the budget
			}
			d = nd
			st.retry(resultOf(res, err)) // what the first try streamed is not streamed again
			st.note("[agentbox] " + nd.Reasons[len(nd.Reasons)-1] + "; output from here is the retry's\n")
			res, err = next.Run(ctx, &h)
		}
	}
	st.flush()
	st.reuse(res, err)
	annotate(res, err, d)
	m.keepArtifacts(CallerOf(ctx).Tenant, res, err)
	m.log.Debug("run", "runtime", d.Tier, "routing", d.Reasons, "kind", KindOf(err))
	return res, err
}

// retry decides whether a result is worth a second run in another tier: the runtime that gave it
// reads, from the result, that the code needed what its tier cannot give (Explainer), and a tier
// after it in the ranking gives that. It returns that tier's runtime and the decision that says
// so.
func (m *Manager) retry(rt Runtime, res *Result, err error, d Decision) (Runtime, Decision, bool) {
	need, to, ok := m.cannot(rt, res, err, d)
	if !ok {
		return nil, d, false
	}
	t, _ := m.tier(to)
	reasons := append(slices.Clone(d.Reasons), string(to)+": retried after "+need.reason(d.Tier))
	return t.rt, Decision{Tier: to, Reasons: reasons}, true
}

// cannot reads a result of rt, the runtime of tier d.Tier: whether it shows the code needed what
// that tier cannot give, and which tier gives it: the first after d.Tier in the ranking (or in the
// Manager's order) whose capabilities give the use, or whose catalog has the module.
func (m *Manager) cannot(rt Runtime, res *Result, err error, d Decision) (Need, Tier, bool) {
	x, ok := rt.(Explainer)
	if !ok {
		return Need{}, "", false
	}
	need, ok := x.Cannot(res, err)
	if !ok {
		return Need{}, "", false
	}
	if to := m.giver(need, d.Tier, d.Ranked); to != "" {
		return need, to, true
	}
	return Need{}, "", false
}

// giver returns the first tier other than from that gives need: among ranked first, then in the
// Manager's order.
func (m *Manager) giver(need Need, from Tier, ranked []Tier) Tier {
	for _, name := range append(slices.Clone(ranked), m.Tiers()...) {
		t, ok := m.tier(name)
		if !ok || name == from {
			continue
		}
		if need.Use != "" && t.caps.Gives(need.Use) {
			return name
		}
		if need.Module != "" && imageWith(t.rt, need.Module) != "" {
			return name
		}
	}
	return ""
}

// resultOf returns a run's result, or the partial result its error carries.
func resultOf(res *Result, err error) *Result {
	if res == nil {
		if e := AsError(err); e != nil {
			return e.Result
		}
	}
	return res
}

// executed is how long a run's code ran: its execution time, also when a limit ended it.
func executed(res *Result, err error) time.Duration {
	if res == nil {
		if e := AsError(err); e != nil {
			res = e.Result
		}
	}
	if res == nil {
		return 0
	}
	return res.Timing.Execute
}

// imageWith returns the first image of rt that can import the top-level module, or "".
func imageWith(rt Runtime, top string) string {
	cat, ok := rt.(Catalog)
	if !ok {
		return ""
	}
	for _, img := range cat.Images() {
		if slices.Contains(img.Modules, top) {
			return img.Name
		}
	}
	return ""
}

// streamFor wraps a run's sink (nil: none); artifacts the run makes while it runs are stored for
// tenant as they come.
func (m *Manager) streamFor(out OutputSink, l Limits, tenant string) *streamer {
	st := newStreamer(out, l)
	if st != nil && m.artifacts != nil {
		st.keep = func(a *Artifact) bool {
			a.Owner = tenant
			if m.storeRoom(tenant, int64(len(a.Content))) != "" {
				return false // the result's copy meets the quota and says so
			}
			if err := m.artifacts.Put(a); err != nil {
				m.log.Error("artifact not kept", "name", a.Name, "err", err)
				return false
			}
			return true
		}
	}
	return st
}

// keepArtifacts moves the artifacts' content of a result (and of an error's partial result) into
// the artifact store, owned by tenant. An artifact that cannot be stored is dropped from the
// result, with a line on its stderr saying so: the run's other output is worth more than failing
// the whole request.
func (m *Manager) keepArtifacts(tenant string, res *Result, err error) {
	keep := func(r *Result) {
		if r == nil || len(r.Artifacts) == 0 {
			return
		}
		kept := r.Artifacts[:0]
		for i := range r.Artifacts {
			a := r.Artifacts[i]
			if a.ID != "" && a.Content == nil {
				kept = append(kept, a) // already stored
				continue
			}
			if m.artifacts == nil {
				continue
			}
			a.Owner = tenant
			if why := m.storeRoom(tenant, int64(len(a.Content))); why != "" {
				r.Stderr += fmt.Sprintf("\n[agentbox] artifact %s was not kept: %s\n", a.Name, why)
				continue
			}
			if err := m.artifacts.Put(&a); err != nil {
				m.log.Error("artifact not kept", "name", a.Name, "err", err)
				r.Stderr += fmt.Sprintf("\n[agentbox] artifact %s was not kept: %v\n", a.Name, err)
				continue
			}
			kept = append(kept, a)
		}
		r.Artifacts = kept
	}
	keep(res)
	if e := AsError(err); e != nil && e.Result != res {
		keep(e.Result)
	}
}

// imageReason says what a request asks of a tier's images.
func imageReason(packages []string, image string) string {
	if image != "" {
		return fmt.Sprintf("image %q requested", image)
	}
	return "packages requested (" + strings.Join(packages, ", ") + ")"
}

// annotate puts the routing decision on a result, including the partial result of a limit error.
// Reasons the tier put on the result itself (the packages it installed on demand) follow the
// router's.
func annotate(res *Result, err error, d Decision) {
	put := func(r *Result) {
		dd := d
		if r.Routing != nil && len(r.Routing.Reasons) > 0 {
			dd.Reasons = append(slices.Clip(d.Reasons), r.Routing.Reasons...)
		}
		r.Routing = &dd
	}
	if res != nil {
		put(res)
	}
	if err == nil {
		return
	}
	if e := AsError(err); e.Result != nil && e.Result != res {
		put(e.Result)
	}
}

func tierStrings(ts []Tier) []string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return s
}
