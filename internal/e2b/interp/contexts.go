package interp

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Contexts. The code interpreter's default Python context is the sandbox's own agentbox session:
// its interpreter, its files. A context made with POST /contexts is a separate interpreter state,
// which agentbox gives as a session of its own (same tier, limits and network as the sandbox's,
// the caller's tenant): its variables are its own, and so are its files, which is where it
// differs from E2B, whose contexts share the sandbox's file system. A context's session is closed
// when the context is removed, restarted (a new one replaces it) or, once the sandbox is gone,
// when the sandbox's contexts are next listed or made; the idle reaper closes one nobody uses.

// defaultContext is the id of the sandbox's own context.
const defaultContext = "default"

type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	session  string
	owner    Engine
	// setup counts the runs made to set the context up (its cwd), which are not its cells.
	setup int
}

// context returns context id of t's sandbox.
func (h *Handler) context(t Target, id string) (*codeContext, bool) {
	if id == defaultContext {
		return &codeContext{ID: defaultContext, Language: "python", Cwd: sandbox.WorkDir, session: t.Session, owner: t.Engine}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.contexts[t.Session] {
		if c.ID == id {
			return c, true
		}
	}
	return nil, false
}

// sweep closes the contexts of sandboxes that are gone.
func (h *Handler) sweep() {
	h.mu.Lock()
	var gone []*codeContext
	for parent, cs := range h.contexts {
		if len(cs) == 0 {
			delete(h.contexts, parent)
			continue
		}
		if _, err := cs[0].owner.Session(parent); sandbox.KindOf(err) == sandbox.KindNotFound {
			gone = append(gone, cs...)
			delete(h.contexts, parent)
		}
	}
	h.mu.Unlock()
	for _, c := range gone {
		_ = c.owner.CloseSession(c.session)
	}
}

type createContextRequest struct {
	Language *string `json:"language"`
	Cwd      *string `json:"cwd"`
}

// newSession starts a context's session like the sandbox's, in cwd; setup is how many runs that
// took.
func newSession(r *http.Request, t Target, cwd string) (id string, setup int, err error) {
	info, err := t.Engine.Session(t.Session)
	if err != nil {
		return "", 0, err
	}
	s, err := t.Engine.CreateSession(r.Context(), sandbox.SessionOptions{Tier: info.Tier, Limits: info.Limits,
		Network: info.Network, EgressProfile: info.EgressProfile})
	if err != nil {
		return "", 0, err
	}
	if cwd != sandbox.WorkDir {
		setup = 1
		code := "import os as _o\n_o.makedirs(" + strconv.Quote(cwd) + ", exist_ok=True)\n_o.chdir(" + strconv.Quote(cwd) + ")\ndel _o\n"
		res, err := t.Engine.RunInSession(r.Context(), s.ID, &sandbox.RunRequest{Code: code})
		if err == nil && res.Error != nil {
			err = sandbox.Errorf(sandbox.KindInvalidRequest, "the context's cwd %s: %s: %s", cwd, res.Error.Name, res.Error.Value)
		}
		if err != nil {
			_ = t.Engine.CloseSession(s.ID)
			return "", 0, err
		}
	}
	return s.ID, setup, nil
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
	if lang != "python" {
		e2bwire.WriteError(w, e2bwire.NotImplemented("POST /contexts with language \""+lang+"\" (Sandbox.createCodeContext): agentbox's code interpreter runs Python"))
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
	h.mu.Lock()
	n := len(h.contexts[t.Session])
	h.mu.Unlock()
	if n >= h.opts.MaxContexts {
		e2bwire.WriteError(w, sandbox.Errorf(sandbox.KindConflict, "this sandbox has %d code contexts, the most it may have (each is a sandbox of its own)", n).
			WithHint("remove contexts you no longer use (Sandbox.removeCodeContext)"))
		return
	}
	session, setup, err := newSession(r, t, cwd)
	if err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	c := &codeContext{ID: "ctx-" + hex.EncodeToString(b[:]), Language: lang, Cwd: cwd, session: session, owner: t.Engine, setup: setup}
	h.mu.Lock()
	h.contexts[t.Session] = append(h.contexts[t.Session], c)
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, c)
}

func (h *Handler) listContexts(w http.ResponseWriter, r *http.Request, t Target) {
	h.sweep()
	def, _ := h.context(t, defaultContext)
	out := []*codeContext{def}
	h.mu.Lock()
	out = append(out, h.contexts[t.Session]...)
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) restartContext(w http.ResponseWriter, r *http.Request, t Target, id string) {
	if id == defaultContext {
		e2bwire.WriteError(w, e2bwire.NotImplemented("POST /contexts/default/restart (Sandbox.restartCodeContext of the default context): the default context is the sandbox's own interpreter; create a context to restart, or rewind the session"))
		return
	}
	c, ok := h.context(t, id)
	if !ok {
		http.Error(w, "Context "+id+" not found", http.StatusNotFound)
		return
	}
	session, setup, err := newSession(r, t, c.Cwd)
	if err != nil {
		e2bwire.WriteError(w, err)
		return
	}
	h.mu.Lock()
	old := c.session
	c.session, c.setup = session, setup
	h.mu.Unlock()
	_ = t.Engine.CloseSession(old)
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) removeContext(w http.ResponseWriter, r *http.Request, t Target, id string) {
	if id == defaultContext {
		e2bwire.WriteError(w, e2bwire.NotImplemented("DELETE /contexts/default (Sandbox.removeCodeContext of the default context): the default context is the sandbox's own interpreter; kill the sandbox to end it"))
		return
	}
	h.mu.Lock()
	var found *codeContext
	cs := h.contexts[t.Session]
	for i, c := range cs {
		if c.ID == id {
			found = c
			h.contexts[t.Session] = append(cs[:i:i], cs[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	if found == nil {
		http.Error(w, "Context "+id+" not found", http.StatusNotFound)
		return
	}
	_ = t.Engine.CloseSession(found.session)
	w.WriteHeader(http.StatusOK)
}
