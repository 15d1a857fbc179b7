package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// route is one method on one path. Patterns use net/http's {name} wildcards, as
// api/openapi.yaml does.
type route struct {
	method  string
	pattern string
	// public routes need no API key.
	public bool
	// scopes are the key scopes that may use the route (any one of them); admin has all.
	scopes []auth.Scope
	// quiet routes log at debug level (probes and scrapes would drown the log).
	quiet bool
	h     http.HandlerFunc
}

// The scopes of the routes (auth.Scope): a key needs one of a route's.
var (
	run           = []auth.Scope{auth.ScopeRun}
	sessions      = []auth.Scope{auth.ScopeSessions}
	files         = []auth.Scope{auth.ScopeFiles}
	intent        = []auth.Scope{auth.ScopeEgressIntent}
	runOrSessions = []auth.Scope{auth.ScopeRun, auth.ScopeSessions}
	policy        = []auth.Scope{auth.ScopePolicyAdmin}
	auditRead     = []auth.Scope{auth.ScopeAuditRead}
	admin         = []auth.Scope{auth.ScopeAdmin}
)

func (s *API) routeTable() []route {
	return []route{
		{method: http.MethodPost, pattern: "/v1/run", scopes: run, h: s.handleRun},
		{method: http.MethodPost, pattern: "/v1/route", scopes: run, h: s.handleRoute},
		{method: http.MethodGet, pattern: "/v1/sessions", scopes: sessions, h: s.handleListSessions},
		{method: http.MethodPost, pattern: "/v1/sessions", scopes: sessions, h: s.handleCreateSession},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}", scopes: sessions, h: s.handleGetSession},
		{method: http.MethodDelete, pattern: "/v1/sessions/{id}", scopes: sessions, h: s.handleCloseSession},
		{method: http.MethodPost, pattern: "/v1/sessions/{id}/run", scopes: sessions, h: s.handleRunInSession},
		{method: http.MethodPost, pattern: "/v1/sessions/{id}/commands", scopes: sessions, h: s.handleRunCommand},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/commands", scopes: sessions, h: s.handleListCommands},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/commands/{cid}", scopes: sessions, h: s.handleGetCommand},
		{method: http.MethodDelete, pattern: "/v1/sessions/{id}/commands/{cid}", scopes: sessions, h: s.handleKillCommand},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/steps", scopes: sessions, h: s.handleListSteps},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/steps/{step}", scopes: sessions, h: s.handleGetStep},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/steps/{step}/inspect", scopes: sessions, h: s.handleInspectStep},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/steps/{step}/diff", scopes: sessions, h: s.handleDiffSteps},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/steps/{step}/files/content", scopes: sessions, h: s.handleReadStepFile},
		{method: http.MethodPost, pattern: "/v1/sessions/{id}/rewind", scopes: sessions, h: s.handleRewind},
		{method: http.MethodPost, pattern: "/v1/sessions/{id}/fork", scopes: sessions, h: s.handleFork},
		{method: http.MethodPost, pattern: "/v1/sessions/{id}/pause", scopes: sessions, h: s.handlePause},
		{method: http.MethodPost, pattern: "/v1/sessions/{id}/resume", scopes: sessions, h: s.handleResume},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/files", scopes: files, h: s.handleListFiles},
		{method: http.MethodDelete, pattern: "/v1/sessions/{id}/files", scopes: files, h: s.handleRemoveFile},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/files/content", scopes: files, h: s.handleReadFile},
		{method: http.MethodPut, pattern: "/v1/sessions/{id}/files/content", scopes: files, h: s.handleWriteFile},
		{method: http.MethodGet, pattern: "/v1/sessions/{id}/intent", scopes: intent, h: s.handleGetIntent},
		{method: http.MethodPut, pattern: "/v1/sessions/{id}/intent", scopes: intent, h: s.handleSetIntent},
		{method: http.MethodDelete, pattern: "/v1/sessions/{id}/intent", scopes: intent, h: s.handleClearIntent},
		{method: http.MethodGet, pattern: "/v1/volumes", scopes: files, h: s.handleListVolumes},
		{method: http.MethodPost, pattern: "/v1/volumes", scopes: files, h: s.handleCreateVolume},
		{method: http.MethodGet, pattern: "/v1/volumes/{name}", scopes: files, h: s.handleGetVolume},
		{method: http.MethodDelete, pattern: "/v1/volumes/{name}", scopes: files, h: s.handleDeleteVolume},
		{method: http.MethodGet, pattern: "/v1/volumes/{name}/files/{path...}", scopes: files, h: s.handleReadVolumeFile},
		{method: http.MethodPut, pattern: "/v1/volumes/{name}/files/{path...}", scopes: files, h: s.handleWriteVolumeFile},
		{method: http.MethodGet, pattern: "/v1/artifacts/{id}", scopes: runOrSessions, h: s.handleGetArtifact},
		{method: http.MethodGet, pattern: "/v1/images", scopes: runOrSessions, h: s.handleListImages},
		{method: http.MethodPost, pattern: "/v1/egress/reload", scopes: policy, h: s.handleReloadEgress},
		{method: http.MethodGet, pattern: "/v1/audit", scopes: auditRead, h: s.handleAudit},
		{method: http.MethodGet, pattern: "/v1/keys", scopes: admin, h: s.handleListKeys},
		{method: http.MethodPost, pattern: "/v1/keys", scopes: admin, h: s.handleCreateKey},
		{method: http.MethodPost, pattern: "/v1/keys/{id}/rotate", scopes: admin, h: s.handleRotateKey},
		{method: http.MethodDelete, pattern: "/v1/keys/{id}", scopes: admin, h: s.handleRevokeKey},
		{method: http.MethodGet, pattern: "/v1/mcp/servers", scopes: admin, h: s.handleListMCPServers},
		{method: http.MethodPost, pattern: "/v1/mcp/servers", scopes: admin, h: s.handleAddMCPServer},
		{method: http.MethodDelete, pattern: "/v1/mcp/servers/{name}", scopes: admin, h: s.handleRemoveMCPServer},
		{method: http.MethodPost, pattern: "/v1/mcp/servers/{name}/approve", scopes: admin, h: s.handleApproveMCPServer},
		{method: http.MethodGet, pattern: "/v1/health", public: true, quiet: true, h: s.handleHealth},
		// Metrics count every tenant's work: the daemon's admin (and its scraper) reads them.
		{method: http.MethodGet, pattern: "/metrics", quiet: true, scopes: admin, h: s.handleMetrics},
	}
}

// Routes lists what the API serves as "METHOD /pattern", sorted.
func (s *API) Routes() []string {
	var out []string
	for _, r := range s.routes {
		// "{path...}" (net/http's rest-of-path wildcard) is "{path}" in api/openapi.yaml.
		out = append(out, r.method+" "+strings.ReplaceAll(r.pattern, "...}", "}"))
	}
	slices.Sort(out)
	return out
}

// mux registers each path once and dispatches on the method itself, so that a wrong method
// gets a typed 405 (with Allow) and an unknown path a typed 404, not net/http's plain text.
func (s *API) mux() http.Handler {
	mux := http.NewServeMux()
	byPattern := map[string][]route{}
	var order []string
	for _, rt := range s.routes {
		if _, ok := byPattern[rt.pattern]; !ok {
			order = append(order, rt.pattern)
		}
		byPattern[rt.pattern] = append(byPattern[rt.pattern], rt)
	}
	for _, p := range order {
		mux.Handle(p, s.dispatch(p, byPattern[p]))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, notFoundRoute(r))
	})
	return mux
}

func notFoundRoute(r *http.Request) error {
	return sandbox.Errorf(sandbox.KindNotFound, "no route %s %s", r.Method, r.URL.Path).
		WithHint("the routes are listed in api/openapi.yaml")
}

func (s *API) dispatch(pattern string, routes []route) http.Handler {
	var allow []string
	for _, rt := range routes {
		allow = append(allow, rt.method)
	}
	allowHeader := strings.Join(allow, ", ")
	// Authentication comes after routing, so an unknown route or a wrong method is answered as
	// such with or without a key.
	handlers := make([]http.Handler, len(routes))
	for i, rt := range routes {
		handlers[i] = rt.h
		if !rt.public {
			handlers[i] = s.auth.Require(rt.h, s.fail, rt.scopes...)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r)
		info.route = pattern
		for i, rt := range routes {
			if rt.method != r.Method {
				continue
			}
			info.quiet = rt.quiet
			handlers[i].ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", allowHeader)
		s.fail(w, r, apiwire.WithStatus(http.StatusMethodNotAllowed,
			invalid("%s is not allowed on %s", r.Method, pattern).WithHint("use %s", allowHeader)))
	})
}
