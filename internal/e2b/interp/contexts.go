package interp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Contexts. The code interpreter's default Python context is the sandbox's own agentbox session:
// its interpreter's main context. A context made with POST /contexts is a code context of that same
// session (sandbox.RunRequest.Context): a namespace of its own in the session's interpreter, with
// its own variables and working directory, and the session's files, commands and packages — as
// E2B's contexts, which are kernels of one sandbox. It costs no sandbox: it is made by its first
// cell. A restart is a run that starts it afresh (in its cwd), a removal a run that forgets it;
// both are steps of the session like its cells, so a rewind takes contexts back too.
//
// This handler keeps, per sandbox, the contexts (the SDK's view) and their cells' counts, in
// memory. A context's id says all the handler needs to know it again — its name in the
// interpreter, and its language and cwd when they are not the defaults (contextID) — so after the
// daemon restarts, a context of a sandbox that lived on is known again at its next call, with the
// variables the sandbox's interpreter kept; only its execution count starts again.

// defaultContext is the id of the sandbox's own context.
const defaultContext = "default"

type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	// name is the context's name in the session's interpreter; "" for the default context.
	name string
}

// key names the context in the sandbox (a bash context's shell): its name in the interpreter,
// short and fixed, unlike its id, which carries its cwd; "default" for the default context.
func (c *codeContext) key() string {
	if c.name == "" {
		return defaultContext
	}
	return c.name
}

// sandboxContexts are the contexts of one sandbox, and what the execution counts need.
type sandboxContexts struct {
	list  []*codeContext
	owner Engine
	// runs counts each context's runs since it was made or restarted, by name ("" the default
	// context's since its last restart, when restarted). others counts the session's runs in
	// contexts other than the default one, which the session's run count (the default context's
	// execution count) includes.
	runs   map[string]int
	others int
	// removed are the names of the contexts removed, which stay unknown.
	removed map[string]bool
	// restarted: the default context was restarted, so its count is runs[""], not the session's.
	restarted bool
}

// state returns sandbox t's contexts, made empty when there are none. Under h.mu.
func (h *Handler) state(t Target) *sandboxContexts {
	sc := h.contexts[t.Session]
	if sc == nil {
		sc = &sandboxContexts{owner: t.Engine, runs: map[string]int{}, removed: map[string]bool{}}
		h.contexts[t.Session] = sc
	}
	return sc
}

// context returns context id of t's sandbox. A well-formed id the handler does not know (it
// was made before the daemon restarted) is known again, unless it was removed.
func (h *Handler) context(t Target, id string) (*codeContext, bool) {
	if id == defaultContext {
		return &codeContext{ID: defaultContext, Language: "python", Cwd: sandbox.WorkDir}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sc := h.contexts[t.Session]
	if sc != nil {
		for _, c := range sc.list {
			if c.ID == id {
				return c, true
			}
		}
	}
	c, ok := parseContextID(id)
	if !ok || sc != nil && sc.removed[c.name] {
		return nil, false
	}
	sc = h.state(t)
	sc.list = append(sc.list, c)
	return c, true
}

// contextID is the id of a context named name (its name in the interpreter: "ctx-" and 16 hex
// digits), of language lang, in cwd: the name alone for Python in sandbox.WorkDir, else
// "NAME.LANG.CWD" with CWD in unpadded base64url.
func contextID(name, lang, cwd string) string {
	if lang == "python" && cwd == sandbox.WorkDir {
		return name
	}
	return name + "." + lang + "." + base64.RawURLEncoding.EncodeToString([]byte(cwd))
}

// parseContextID reads a context back from its id (contextID).
func parseContextID(id string) (*codeContext, bool) {
	parts := strings.Split(id, ".")
	name := parts[0]
	if len(name) != 20 || !strings.HasPrefix(name, "ctx-") {
		return nil, false
	}
	if _, err := hex.DecodeString(name[4:]); err != nil {
		return nil, false
	}
	c := &codeContext{ID: id, Language: "python", Cwd: sandbox.WorkDir, name: name}
	switch len(parts) {
	case 1:
	case 3:
		b, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil || (parts[1] != "python" && parts[1] != "bash") {
			return nil, false
		}
		cwd, err := sandbox.CleanPath(string(b))
		if err != nil || cwd != string(b) {
			return nil, false
		}
		c.Language, c.Cwd = parts[1], cwd
	default:
		return nil, false
	}
	return c, true
}

// executionCount is the number the next cell of c will have: its cells so far, plus one
// (Jupyter's count). The default context's is the session's runs less the other contexts', kept
// by the session itself, so it survives pause and the daemon's restart.
func (h *Handler) executionCount(t Target, c *codeContext) int {
	h.mu.Lock()
	sc := h.contexts[t.Session]
	var n, others int
	restarted := false
	if sc != nil {
		n, others, restarted = sc.runs[c.name], sc.others, sc.restarted
	}
	h.mu.Unlock()
	if c.name != "" || restarted {
		return n + 1
	}
	info, err := t.Engine.Session(t.Session)
	if err != nil {
		return 0
	}
	return max(info.Runs-others, 0) + 1
}

// counted notes a run in context c of t's sandbox; a cell counts toward c's execution count.
func (h *Handler) counted(t Target, c *codeContext, cell bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sc := h.state(t)
	if c.name != "" {
		sc.others++
	}
	if cell {
		sc.runs[c.name]++
	}
}

// contextRun runs a cell-less run in context c: its restart (reset) or its removal (end).
func (h *Handler) contextRun(ctx context.Context, t Target, c *codeContext, reset, end bool) error {
	run := &sandbox.RunRequest{Context: c.name, ContextReset: reset, ContextEnd: end}
	if reset && c.name != "" {
		run.ContextDir = c.Cwd
	}
	res, err := t.Engine.RunInSession(ctx, t.Session, run)
	if err == nil && res.Error != nil {
		err = sandbox.Errorf(sandbox.KindInvalidRequest, "the context's working directory %s: %s: %s", c.Cwd, res.Error.Name, res.Error.Value)
	}
	if err != nil {
		return err
	}
	h.counted(t, c, false)
	return nil
}

// sweep forgets the contexts of sandboxes that are gone.
func (h *Handler) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for parent, sc := range h.contexts {
		if _, err := sc.owner.Session(parent); sandbox.KindOf(err) == sandbox.KindNotFound {
			delete(h.contexts, parent)
		}
	}
}

type createContextRequest struct {
	Language *string `json:"language"`
	Cwd      *string `json:"cwd"`
}

func (h *Handler) createContext(w http.ResponseWriter, r *http.Request, t Target) {
	h.sweep()
	var req createContextRequest
	if err := decode(r, &req); err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	lang := "python"
	if req.Language != nil {
		lang = normalize(*req.Language)
	}
	if lang != "python" && lang != "bash" {
		e2bwire.WriteError(w, e2bwire.NotImplemented("POST /contexts with language \""+lang+"\" (Sandbox.createCodeContext): agentbox's code interpreter runs Python and bash"))
		return
	}
	cwd := sandbox.WorkDir
	if req.Cwd != nil && *req.Cwd != "" {
		p, err := sandbox.CleanPath(*req.Cwd)
		if err != nil {
			e2bwire.WriteError(w, err)
			return
		}
		cwd = p
	}
	// The session must exist for this caller (internal/e2b checked it; a direct Serve may not).
	if _, err := t.Engine.Session(t.Session); err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "ctx-" + hex.EncodeToString(b[:])
	c := &codeContext{ID: contextID(name, lang, cwd), Language: lang, Cwd: cwd, name: name}
	h.mu.Lock()
	sc := h.state(t)
	if n := len(sc.list); n >= h.opts.MaxContexts {
		h.mu.Unlock()
		e2bwire.WriteError(w, sandbox.Errorf(sandbox.KindConflict, "this sandbox has %d code contexts besides its default one, the most it may have", n).
			WithHint("remove contexts you no longer use (Sandbox.removeCodeContext)"))
		return
	}
	sc.list = append(sc.list, c)
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, c)
}

func (h *Handler) listContexts(w http.ResponseWriter, r *http.Request, t Target) {
	h.sweep()
	def, _ := h.context(t, defaultContext)
	out := []*codeContext{def}
	h.mu.Lock()
	if sc := h.contexts[t.Session]; sc != nil {
		out = append(out, sc.list...)
	}
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// restartContext starts the context afresh: no variables, in its cwd; its files stay (they are
// the sandbox's).
func (h *Handler) restartContext(w http.ResponseWriter, r *http.Request, t Target, id string) {
	c, ok := h.context(t, id)
	if !ok {
		http.Error(w, "Context "+id+" not found", http.StatusNotFound)
		return
	}
	if err := h.contextRun(r.Context(), t, c, true, false); err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	endShell(t, c)
	h.mu.Lock()
	sc := h.state(t)
	sc.runs[c.name] = 0
	if c.name == "" {
		sc.restarted = true
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) removeContext(w http.ResponseWriter, r *http.Request, t Target, id string) {
	if id == defaultContext {
		e2bwire.WriteError(w, e2bwire.NotImplemented("DELETE /contexts/default (Sandbox.removeCodeContext of the default context): the default context is the sandbox's own interpreter; restart it to clear it, or kill the sandbox to end it"))
		return
	}
	c, ok := h.context(t, id)
	if !ok {
		http.Error(w, "Context "+id+" not found", http.StatusNotFound)
		return
	}
	if err := h.contextRun(r.Context(), t, c, false, true); err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	endShell(t, c)
	h.mu.Lock()
	if sc := h.contexts[t.Session]; sc != nil {
		for i, x := range sc.list {
			if x == c {
				sc.list = append(sc.list[:i:i], sc.list[i+1:]...)
				break
			}
		}
		delete(sc.runs, c.name)
		sc.removed[c.name] = true
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}
