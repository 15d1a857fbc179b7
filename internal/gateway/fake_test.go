package gateway_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/cluster"
)

// The key every fake node and the gateway accept, and the cluster token.
const (
	clientKey = "client-key"
	token     = "cluster-token"
)

// fakeNode is a node's HTTP surface, enough for the gateway: capacity, runs (JSON and streamed),
// sessions, adopt, audit, metrics, a hosted MCP server.
type fakeNode struct {
	id  string
	srv *httptest.Server

	mu       sync.Mutex
	warm     map[string]map[string]int // tier → image → free
	sessions map[string]bool
	adopts   []string
	// movedTo names, by session, the node that owns it now: adopt answers with it.
	movedTo  map[string]*fakeNode
	draining bool
	records  []string // audit lines
	log      *audit.Log
	runs     atomic.Int64
	// release, when set, holds a streamed run after its first event until closed.
	release chan struct{}
	// infoDelay slows GET /v1/node (a loaded node), nanoseconds.
	infoDelay atomic.Int64
	// uploads counts the file uploads (PUT .../files/content) that reached the node; uploaded is
	// how many bytes of the one under way it has read so far.
	uploads, uploaded atomic.Int64
}

func newFakeNode(t *testing.T, id string) *fakeNode {
	t.Helper()
	f := &fakeNode{id: id, sessions: map[string]bool{}, warm: map[string]map[string]int{"nano": {"default": 2}}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNode) node() cluster.Node {
	return cluster.Node{ID: f.id, Addr: f.srv.URL, Healthy: true, Source: "static"}
}

func (f *fakeNode) setWarm(tier, image string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.warm[tier] == nil {
		f.warm[tier] = map[string]int{}
	}
	f.warm[tier][image] = n
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errBody(code, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg, "hint": "fake"}}
}

func (f *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	p := r.URL.Path
	if strings.HasPrefix(p, "/v1/node") {
		if auth != "Bearer "+token {
			writeJSON(w, 401, errBody("unauthorized", "node endpoints need the token"))
			return
		}
	} else if auth != "Bearer "+clientKey && !strings.HasPrefix(auth, "Bearer abt_") {
		writeJSON(w, 401, errBody("unauthorized", "bad key"))
		return
	}
	if p == "/v1/node" {
		time.Sleep(time.Duration(f.infoDelay.Load()))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case p == "/v1/node":
		info := cluster.NodeInfo{ID: f.id, Addr: f.srv.URL, Role: "node", Draining: f.draining, Tiers: map[string]cluster.TierInfo{}, Sessions: len(f.sessions)}
		for t, imgs := range f.warm {
			info.Tiers[t] = cluster.TierInfo{WarmFree: imgs, MaxSessions: 32}
		}
		if f.log != nil {
			info.AuditKey = f.log.PublicKey()
		}
		writeJSON(w, 200, info)
	case p == "/v1/node/adopt":
		var req struct{ Session string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.adopts = append(f.adopts, req.Session)
		if to := f.movedTo[req.Session]; to != nil {
			writeJSON(w, 200, map[string]any{"owner": to.id, "addr": to.srv.URL, "adopted": false})
			return
		}
		if !f.sessions[req.Session] && strings.Contains(req.Session, "-none") {
			writeJSON(w, 404, errBody("not_found", "session "+req.Session+" is not in the shared store"))
			return
		}
		f.sessions[req.Session] = true
		writeJSON(w, 200, map[string]any{"owner": f.id, "addr": f.srv.URL, "adopted": true, "step": "st_1"})
	case p == "/v1/node/audit/proof":
		var seq int64
		fmt.Sscan(r.URL.Query().Get("seq"), &seq)
		pr, err := audit.Prove(r.Context(), f.log.Dir(), f.log.PublicKey(), seq)
		if err != nil {
			writeJSON(w, 404, errBody("not_found", err.Error()))
			return
		}
		writeJSON(w, 200, pr)
	case p == "/v1/run" || p == "/v1/sessions/"+sessionOf(p)+"/run":
		f.runs.Add(1)
		if sid := sessionOf(p); sid != "" && (!f.sessions[sid] || auth != "Bearer "+clientKey) {
			writeJSON(w, 404, errBody("not_found", "session "+sid+" not found"))
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			release := f.release
			f.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: stdout\ndata: {\"type\":\"stdout\",\"text\":\"first from %s\\n\"}\n\n", f.id)
			w.(http.Flusher).Flush()
			if release != nil {
				<-release
			}
			fmt.Fprintf(w, "event: result\ndata: {\"type\":\"result\",\"result\":{\"stdout\":\"done\"}}\n\n")
			f.mu.Lock()
			return
		}
		writeJSON(w, 200, map[string]any{"node": f.id, "stdout": string(body)})
	case strings.HasPrefix(p, "/v1/sessions/") && strings.HasSuffix(p, "/files/content") && r.Method == "PUT":
		f.uploads.Add(1)
		f.uploaded.Store(0)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			f.uploaded.Add(int64(n))
			if err != nil {
				break
			}
		}
		writeJSON(w, 200, map[string]any{"node": f.id, "bytes": f.uploaded.Load()})
	case p == "/v1/sessions" && r.Method == "POST":
		id := cluster.SessionPrefix(f.id) + fmt.Sprintf("%04x", len(f.sessions))
		f.sessions[id] = true
		writeJSON(w, 201, map[string]any{"id": id, "created_at": time.Now()})
	case p == "/v1/sessions" && r.Method == "GET":
		var list []map[string]any
		for id := range f.sessions {
			list = append(list, map[string]any{"id": id})
		}
		writeJSON(w, 200, map[string]any{"sessions": list})
	case p == "/v1/audit":
		recs := make([]json.RawMessage, len(f.records))
		for i, r := range f.records {
			recs[i] = json.RawMessage(r)
		}
		writeJSON(w, 200, map[string]any{"records": recs})
	case p == "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		var out io.Writer = w
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") { // as promhttp does
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		fmt.Fprintf(out, "# HELP agentbox_runs_total Runs.\n# TYPE agentbox_runs_total counter\nagentbox_runs_total{tier=\"nano\"} %d\n", f.runs.Load())
	case p == "/mcp":
		writeJSON(w, 200, map[string]any{"node": f.id})
	case strings.HasPrefix(p, "/mcp/servers/"):
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" {
			w.Header().Set("Mcp-Session-Id", "mcp-"+f.id)
		} else if sid != "mcp-"+f.id {
			writeJSON(w, 404, errBody("not_found", "no MCP session "+sid))
			return
		}
		writeJSON(w, 200, map[string]any{"node": f.id})
	default:
		writeJSON(w, 404, errBody("not_found", "no route "+p))
	}
}

// sessionOf is the id in /v1/sessions/{id}/..., "" otherwise.
func sessionOf(p string) string {
	rest, ok := strings.CutPrefix(p, "/v1/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}
