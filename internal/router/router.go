package router

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Options configure a Router. The router reads code for two kinds of tier: one whose interpreter
// has a fixed set of modules and refuses threads, processes and sockets (nano), where code that
// needs nothing more goes first, and one that runs images (heavy), where the rest goes. The
// wiring names both; the router knows no tier by name.
type Options struct {
	// Names are the two tiers' names: reasons begin with them ("nano: no imports").
	Names Names
	// Nano is what the nano build can import. Required: a router without it would send
	// everything to heavy.
	Nano NanoModules
	// Images lists the heavy tier's images and the modules each can import. Nil when this
	// daemon runs no heavy tier: code that needs more than nano then runs in nano anyway and
	// fails there with the interpreter's own ModuleNotFoundError.
	Images func() []sandbox.ImageInfo
	// NanoMax are the largest limits the nano runtime can honour (Capabilities.Max); a request
	// above them goes to heavy. A zero field means nano has no cap of its own there.
	NanoMax sandbox.Limits
}

// Names are the tiers a Router ranks.
type Names struct {
	// Fixed is the tier with a fixed set of modules (Options.Nano).
	Fixed sandbox.Tier
	// Images is the tier that runs images (Options.Images).
	Images sandbox.Tier
}

// Router reads a request's code and decides its tier. It is safe for concurrent use.
type Router struct {
	names   Names
	nano    nanoSet
	images  func() []sandbox.ImageInfo
	nanoMax sandbox.Limits
	targets []Target

	mu      sync.Mutex
	modules map[string]map[string]bool // image hash → top-level modules

	// treeOnly reads every request with tree-sitter, as the router did before its fast path:
	// for the tests and the benchmark that compare the two.
	treeOnly bool
	// budget replaces parseBudget when set: for the tests that compare two readings of the
	// same code, which a loaded machine must not turn into one read and one stopped parse.
	budget time.Duration
}

// Interface guards.
var _ sandbox.Router = (*Router)(nil)

// New builds a router. The heavy images are asked for their Python version once, here, for
// conditions on sys.version_info.
func New(opts Options) *Router {
	r := &Router{names: opts.Names, nano: newNanoSet(opts.Nano), images: opts.Images, nanoMax: opts.NanoMax, modules: map[string]map[string]bool{}}
	r.targets = []Target{{Version: opts.Nano.Version, Platform: "wasi"}}
	if r.images != nil {
		for _, img := range r.images() {
			if v, ok := parseVersion(img.Python); ok {
				r.targets = append(r.targets, Target{Version: v, Platform: "linux"})
			}
		}
	}
	return r
}

// Route decides the tier of an auto request, and checks an explicit nano request: its code must
// parse and must not import what nano lacks. Packages and images are the Manager's business
// (they always mean heavy); explicit heavy requests never come here.
//
// A syntax error the router is sure of comes back as Decision.SyntaxError: the run is answered
// with it and no sandbox starts.
func (r *Router) Route(req *sandbox.RunRequest) (sandbox.Decision, error) {
	fixed, images := r.names.Fixed, r.names.Images
	explicit := req.Tier == fixed
	if req.Tier != "" && req.Tier != sandbox.TierAuto && !explicit {
		// Another tier asked for by name: its own interpreter reads the code.
		return sandbox.Decision{Tier: req.Tier, Reasons: []string{string(req.Tier) + ": runtime requested"}}, nil
	}
	a := r.analyze([]byte(req.Code))
	if a.Err != nil {
		e := a.Err
		return sandbox.Decision{
			Tier:        fixed,
			Reasons:     []string{fmt.Sprintf("%s: %s at line %d, column %d (not run)", fixed, e.Name, e.Line, e.Column)},
			SyntaxError: e.PyError(),
		}, nil
	}
	v := r.verdict(req, a)
	if explicit {
		return r.checkNano(req, v)
	}
	if len(v.heavy) > 0 {
		if r.images == nil {
			return sandbox.Decision{Tier: fixed, Reasons: append(v.heavy,
				fmt.Sprintf("%[1]s: this daemon runs no %[2]s tier, so the code runs in %[1]s and may fail there", fixed, images))}, nil
		}
		return sandbox.Decision{Tier: images, Ranked: []sandbox.Tier{images}, Reasons: v.heavy, Guess: v.guess}, nil
	}
	d := sandbox.Decision{Tier: fixed, Ranked: []sandbox.Tier{fixed}, Reasons: v.nano}
	if r.images != nil {
		d.Ranked = append(d.Ranked, images)
	}
	return d, nil
}

func (r *Router) analyze(code []byte) *Analysis {
	// As Analyze, with the router's budget.
	if !r.treeOnly {
		if a, _ := analyzeFast(code, r.targets); a != nil {
			return a
		}
	}
	budget := r.budget
	if budget == 0 {
		budget = parseBudget(len(code))
	}
	return analyze(code, budget, r.targets...)
}

// verdict is what the router found, as reasons for each tier.
type verdict struct {
	heavy []string // why the code needs heavy; empty when nano will do
	nano  []string // why nano will do, and notes
	// absent are the required imports nano lacks, for an explicit nano request.
	absent []Import
	// guess says heavy rests only on imports no tier has (sandbox.Decision.Guess).
	guess bool
	cat   *catalog
}

func (r *Router) verdict(req *sandbox.RunRequest, a *Analysis) verdict {
	fixed := string(r.names.Fixed)
	v := verdict{cat: &catalog{r: r}}
	v.heavy = r.limitReasons(req)
	local := localModules(req.Files)
	var inNano, inputs, relative, optional []string
	byImage := map[string][]string{}
	var imageOrder, nowhere []string
	seen := map[string]bool{}
	for _, imp := range a.Imports {
		for _, name := range r.candidates(imp) {
			if seen[name] {
				continue
			}
			seen[name] = true
			top, _, _ := strings.Cut(name, ".")
			switch {
			case top == "":
				relative = append(relative, name)
			case local[top]:
				inputs = append(inputs, top)
			case r.nano.has(name):
				inNano = appendOnce(inNano, top)
			case imp.Optional:
				optional = appendOnce(optional, top)
			default:
				v.absent = append(v.absent, Import{Module: name, Line: imp.Line})
				// Name the package nano lacks: matplotlib for matplotlib.pyplot, but
				// encodings.bz2_codec where only the submodule is missing.
				shown := top
				if r.nano.has(top) {
					shown = name
				}
				if img := v.cat.offeredBy(top); img != "" {
					if len(byImage[img]) == 0 {
						imageOrder = append(imageOrder, img)
					}
					byImage[img] = appendOnce(byImage[img], shown)
				} else {
					nowhere = appendOnce(nowhere, shown)
				}
			}
		}
	}
	for _, img := range imageOrder {
		v.heavy = append(v.heavy, fmt.Sprintf("%s: imports %s (not in %s; in image %s)", r.names.Images, list(byImage[img]), r.names.Fixed, img))
	}
	if len(nowhere) > 0 {
		where := "not in " + string(r.names.Fixed) + " nor in any image"
		if r.images == nil {
			where = "not in " + string(r.names.Fixed)
		}
		v.heavy = append(v.heavy, fmt.Sprintf("%s: imports %s (%s)", r.names.Images, list(nowhere), where))
	}
	v.guess = len(nowhere) > 0 && len(v.heavy) == 1 && len(a.Uses) == 0
	v.heavy = append(v.heavy, useReasons(r.names, a.Uses)...)

	switch {
	case a.Unread:
	case len(inNano) == 0 && len(inputs) == 0:
		v.nano = append(v.nano, fixed+": no imports")
	case len(inNano) > 0:
		v.nano = append(v.nano, fmt.Sprintf("%s: imports only %s (all in %s)", fixed, list(inNano), fixed))
	}
	if len(inputs) > 0 {
		v.nano = append(v.nano, fmt.Sprintf("%s: imports %s from the input files", fixed, list(inputs)))
	}
	if len(optional) > 0 {
		v.nano = append(v.nano, fmt.Sprintf("%s: optional import of %s left out (guarded by except ImportError)", fixed, list(optional)))
	}
	if len(relative) > 0 {
		v.nano = append(v.nano, fmt.Sprintf("%s: relative import %s has no package to resolve in (the interpreter will say so)", fixed, list(relative)))
	}
	if a.Dynamic > 0 {
		v.nano = append(v.nano, fmt.Sprintf("%[1]s: %[3]d dynamic import(s) the router cannot read (a ModuleNotFoundError in %[1]s is retried in %[2]s)", fixed, r.names.Images, a.Dynamic))
	}
	if a.Doubt != nil {
		v.nano = append(v.nano, fmt.Sprintf("%s: the grammar could not read line %d; the interpreter decides", fixed, a.Doubt.Line))
	}
	if a.Unread {
		v.nano = append(v.nano, fmt.Sprintf("%[1]s: the code took longer than %[3]v to read, so its imports are unknown (a ModuleNotFoundError in %[1]s is retried in %[2]s)", fixed, r.names.Images, parseBudget(len(req.Code)).Round(time.Millisecond)))
	}
	return v
}

// candidates are the module names an import needs: the module, and for `from pkg import name`
// also pkg.name where the probe knows that as a module (from encodings import bz2_codec).
func (r *Router) candidates(imp Import) []string {
	out := []string{imp.Module}
	if strings.HasPrefix(imp.Module, ".") {
		return out
	}
	for _, n := range imp.Names {
		if full := imp.Module + "." + n; r.nano.known(full) {
			out = append(out, full)
		}
	}
	return out
}

// checkNano answers an explicit nano request: an import nano lacks fails it at once, before a
// sandbox starts. (A one-shot run has nothing to import but nano's modules and its input files;
// code that writes a module and then imports it is the one case this refuses wrongly.)
func (r *Router) checkNano(req *sandbox.RunRequest, v verdict) (sandbox.Decision, error) {
	if len(v.absent) > 0 {
		imp := v.absent[0]
		where := "it is not in the " + string(r.names.Fixed) + " build"
		if img := v.cat.offeredBy(imp.Top()); img != "" {
			where += "; " + string(r.names.Images) + " image " + img + " has it"
		}
		return sandbox.Decision{}, sandbox.Errorf(sandbox.KindInvalidRequest, "runtime %s cannot import %s (line %d): %s", r.names.Fixed, imp.Module, imp.Line, where).
			WithHint("use runtime auto or %s", r.names.Images)
	}
	if err := r.checkNanoLimits(req); err != nil {
		return sandbox.Decision{}, err
	}
	return sandbox.Decision{Tier: r.names.Fixed, Reasons: []string{string(r.names.Fixed) + ": runtime requested"}}, nil
}

// limitReasons says which of the request's limits and inputs nano cannot take.
func (r *Router) limitReasons(req *sandbox.RunRequest) []string {
	var out []string
	m, l := r.nanoMax, req.Limits
	to, from := r.names.Images, r.names.Fixed
	if m.MemoryBytes > 0 && l.MemoryBytes > m.MemoryBytes {
		out = append(out, fmt.Sprintf("%s: memory %s is above %s's maximum of %s", to, mib(l.MemoryBytes), from, mib(m.MemoryBytes)))
	}
	if m.Timeout > 0 && l.Timeout > m.Timeout {
		out = append(out, fmt.Sprintf("%s: timeout %v is above %s's maximum of %v", to, l.Timeout, from, m.Timeout))
	}
	if m.FilesBytes > 0 {
		var in int64
		for _, f := range req.Files {
			in += int64(len(f.Content))
		}
		switch {
		case in > m.FilesBytes:
			out = append(out, fmt.Sprintf("%s: input files of %s are above %s's maximum of %s", to, mib(in), from, mib(m.FilesBytes)))
		case l.FilesBytes > m.FilesBytes:
			out = append(out, fmt.Sprintf("%s: files limit %s is above %s's maximum of %s", to, mib(l.FilesBytes), from, mib(m.FilesBytes)))
		}
	}
	return out
}

func (r *Router) checkNanoLimits(req *sandbox.RunRequest) error {
	if rs := r.limitReasons(req); len(rs) > 0 {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "runtime %s cannot take this request: %s", r.names.Fixed, strings.TrimPrefix(rs[0], string(r.names.Images)+": ")).
			WithHint("use runtime auto or %s, or ask for less", r.names.Images)
	}
	return nil
}

func mib(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', -1, 64) + " MiB" }

// catalog is the heavy images as one Route sees them: listed once (the heavy runtime reads
// them from disk) and only if an import needs looking up.
type catalog struct {
	r      *Router
	imgs   []sandbox.ImageInfo
	loaded bool
}

// offeredBy returns the first image (the default first) that can import the top-level module,
// or "".
func (c *catalog) offeredBy(top string) string {
	if c.r.images == nil || top == "" {
		return ""
	}
	if !c.loaded {
		c.imgs, c.loaded = c.r.images(), true
	}
	for _, img := range c.imgs {
		if c.r.imageModules(img)[top] {
			return img.Name
		}
	}
	return ""
}

func (r *Router) imageModules(img sandbox.ImageInfo) map[string]bool {
	key := img.Name + "@" + img.Hash
	r.mu.Lock()
	defer r.mu.Unlock()
	set, ok := r.modules[key]
	if !ok {
		set = make(map[string]bool, len(img.Modules))
		for _, m := range img.Modules {
			set[m] = true
		}
		r.modules[key] = set
	}
	return set
}

// localModules are the top-level modules the request's input files make importable from the
// working directory: helper.py, pkg/__init__.py, data.so.
func localModules(files []sandbox.File) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		p, err := sandbox.CleanPath(f.Path)
		if err != nil || !strings.HasPrefix(p, sandbox.WorkDir+"/") {
			continue
		}
		rel := strings.TrimPrefix(p, sandbox.WorkDir+"/")
		first, rest, nested := strings.Cut(rel, "/")
		if nested && rest != "" {
			out[first] = true // a package, or a namespace package
			continue
		}
		if ext := path.Ext(first); ext == ".py" || ext == ".pyc" || ext == ".so" {
			name, _, _ := strings.Cut(first, ".")
			out[name] = true
		}
	}
	return out
}

// list joins names for a reason, the first few only.
func list(names []string) string {
	const show = 6
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// parseVersion reads "3.11.2" into its numbers.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return v, false
	}
	for i, p := range parts {
		p = strings.TrimRightFunc(p, func(r rune) bool { return r < '0' || r > '9' })
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}
