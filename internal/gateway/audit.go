package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// audit answers GET /v1/audit across the cluster: each node answers the query for the caller
// (its tenant's records only, unless admin), the gateway marks each record with its node
// ("node": ID; with its seq it names the record) and keeps the most recent limit, oldest first.
func (g *Gateway) audit(w http.ResponseWriter, r *http.Request) {
	limit := audit.DefaultQueryLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			limit = n // the nodes refuse a bad one, with the reason
		}
	}
	ans, err := g.fanOut(r, r.URL.Path, &body{buf: []byte{}}, 64<<20)
	if err != nil {
		fail(w, err)
		return
	}
	type rec struct {
		raw json.RawMessage
		t   time.Time
	}
	lists, ok := listsOf(w, ans, "records", "audit records that do not parse")
	if !ok {
		return
	}
	var all []rec
	for i, list := range lists {
		for _, raw := range list {
			var h struct {
				Time time.Time `json:"time"`
			}
			_ = json.Unmarshal(raw, &h)
			all = append(all, rec{raw: withNode(raw, ans[i].n.ID), t: h.Time})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].t.Before(all[j].t) })
	if len(all) > limit {
		all = all[len(all)-limit:]
	}
	out := make([]json.RawMessage, len(all))
	for i, r := range all {
		out[i] = r.raw
	}
	writeJSON(w, http.StatusOK, struct {
		Records []json.RawMessage `json:"records"`
	}{Records: out})
}

// ProofAnswer is GET /v1/audit/proof's answer: the node's inclusion proof of one of its records,
// which the gateway verified with the node's audit key before answering.
type ProofAnswer struct {
	Node string `json:"node"`
	audit.Proof
	// AuditKey is the node's verifier key the proof was checked with.
	AuditKey string `json:"audit_key"`
	Verified bool   `json:"verified"`
}

// auditProof answers GET /v1/audit/proof?node=ID&seq=N: it asks node ID for the inclusion proof
// of its record N, verifies it with the node's audit key (from GET /v1/node), and answers only
// a caller that may read the record: audit-read, and its own tenant's records unless admin.
func (g *Gateway) auditProof(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r.Context())
	if err := id.Allows("an audit record's proof", auth.ScopeAuditRead); err != nil {
		fail(w, err)
		return
	}
	q := r.URL.Query()
	nodeID, seqText := q.Get("node"), q.Get("seq")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if nodeID == "" || err != nil || seq < 0 {
		fail(w, sandbox.Errorf(sandbox.KindInvalidRequest, "the proof of a record needs node=ID and seq=N").
			WithHint("take both from a record of GET /v1/audit (its node and seq)"))
		return
	}
	n := g.byID(nodeID)
	if n == nil || !n.healthy() {
		fail(w, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "node %s is not reachable now, and its records are proved by it", nodeID).
			WithHint("ask again when the node is back: its log stays verifiable on its disk (agentbox audit verify)"))
		return
	}
	key := n.info().AuditKey
	if key == "" {
		fail(w, sandbox.Errorf(sandbox.KindNotFound, "node %s keeps no audit log", nodeID))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, n.Addr+"/v1/node/audit/proof?seq="+url.QueryEscape(seqText), nil)
	if err != nil {
		fail(w, err)
		return
	}
	if g.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.opts.Token)
	}
	resp, err := g.tr.RoundTrip(req)
	if err != nil {
		fail(w, unreachable(n, err))
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		fail(w, unreachable(n, err))
		return
	}
	if resp.StatusCode != http.StatusOK {
		fail(w, nodeError(n, resp.StatusCode, b))
		return
	}
	var p audit.Proof
	if err := json.Unmarshal(b, &p); err != nil {
		fail(w, sandbox.Errorf(sandbox.KindInternal, "node %s: a proof that does not parse: %v", nodeID, err))
		return
	}
	var rec struct {
		Seq    int64  `json:"seq"`
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal([]byte(p.Record), &rec) != nil || rec.Seq != seq || p.Seq != seq {
		fail(w, sandbox.Errorf(sandbox.KindInternal, "node %s answered the proof of another record than %d", nodeID, seq))
		return
	}
	if !id.Admin && rec.Tenant != id.Tenant {
		// Another tenant's record is not found, as everything of another tenant is.
		fail(w, sandbox.Errorf(sandbox.KindNotFound, "node %s has no record %d of yours", nodeID, seq))
		return
	}
	if err := p.Verify(key); err != nil {
		g.log.Error("a node's audit proof does not verify", "node", nodeID, "seq", seq, "err", err)
		fail(w, sandbox.Errorf(sandbox.KindInternal, "node %s's proof of record %d does not verify: %v", nodeID, seq, err).
			WithHint("the node's audit log may have been altered: run agentbox audit verify on it"))
		return
	}
	writeJSON(w, http.StatusOK, ProofAnswer{Node: nodeID, Proof: p, AuditKey: key, Verified: true})
}
