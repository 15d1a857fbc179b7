package nodeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
)

// Moving sessions between nodes (issue 18, "sessions survive a node"). A node's sessions are
// kept in storage every node sees (internal/sharedstore): their records, with an owner and an
// epoch, and their durable snapshots. POST /v1/node/adopt asks this node to take a session whose
// owner is gone or drained: it checks the owner (its advertised address must not answer, or say
// it drains), wins the session in the shared store (exactly one node does), and hands the record
// to the Manager, which restores the session lazily from its latest durable step and gives the
// first run's answer a session_moved notice. POST /v1/node/drain makes every session durable and
// releases it.

// Mover is what moving sessions asks of the Manager (sandbox.Manager).
type Mover interface {
	Adopt(id string, record []byte, notice sandbox.Notice) (sandbox.SessionInfo, error)
	Drain(ctx context.Context) ([]string, error)
	Draining() bool
	Session(id string) (sandbox.SessionInfo, error)
}

// Owners is the shared store as adoption uses it (sharedstore.NodeRecords).
type Owners interface {
	Get(ctx context.Context, id string) (sharedstore.Record, error)
	Claim(ctx context.Context, id string, from uint64) (sharedstore.Record, error)
	Release(id string) error
	Forget(id string)
}

// Interface guards.
var (
	_ Mover  = (*sandbox.Manager)(nil)
	_ Owners = (*sharedstore.NodeRecords)(nil)
)

// ownerCheckTimeout bounds asking the owner of a session whether it is there: a node that is
// gone refuses the connection at once (a dead process) or not at all (a dead machine).
const ownerCheckTimeout = 500 * time.Millisecond

// POST /v1/node/adopt
func (h *Handler) adopt(w http.ResponseWriter, r *http.Request) {
	var req cluster.AdoptRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || req.Session == "" {
		Fail(w, r, sandbox.Errorf(sandbox.KindInvalidRequest, "the body must be {\"session\": ID}").
			WithHint("POST /v1/node/adopt {\"session\": \"sb_n1-...\"}"))
		return
	}
	res, err := h.AdoptFor(r.Context(), req)
	if err != nil {
		Fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}

// Adopt takes the session if its owner is gone or drained, and says who owns it now (for an
// operator: any session).
func (h *Handler) Adopt(ctx context.Context, id, reason string) (cluster.AdoptResult, error) {
	return h.AdoptFor(ctx, cluster.AdoptRequest{Session: id, Reason: reason})
}

// AdoptFor is Adopt on behalf of req.For, when given: a session that caller may not see (another
// tenant's) is not_found, exactly as one that does not exist, before anything about it is read
// out or changed, so a stranger's request can neither move a session nor learn where it is.
func (h *Handler) AdoptFor(ctx context.Context, req cluster.AdoptRequest) (cluster.AdoptResult, error) {
	id, reason := req.Session, req.Reason
	mv, own := h.opts.Mover, h.opts.Owners
	notFound := func() error {
		return sandbox.Errorf(sandbox.KindNotFound, "session %s is not in the cluster's shared store (closed, or never created)", id).
			WithHint("create a new session")
	}
	me := cluster.AdoptResult{Owner: h.opts.ID, Addr: h.opts.Addr}
	if info, err := mv.Session(id); err == nil {
		if !req.For.Owns(info.Tenant) {
			return cluster.AdoptResult{}, notFound()
		}
		me.Step = info.Head
		return me, nil // this node has it already
	}
	for attempt := 0; ; attempt++ {
		rec, err := own.Get(ctx, id)
		if errors.Is(err, sharedstore.ErrNotFound) {
			return cluster.AdoptResult{}, notFound()
		}
		if err != nil {
			return cluster.AdoptResult{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the shared store: %v", err)
		}
		if req.For != nil {
			tenant, err := sandbox.RecordTenant(rec.Data)
			if err != nil || !req.For.Owns(tenant) {
				return cluster.AdoptResult{}, notFound()
			}
		}
		why := reason
		if rec.Owner != h.opts.ID && !rec.Released {
			alive, draining := h.ownerUp(ctx, rec.Addr)
			if alive && !draining {
				return cluster.AdoptResult{Owner: rec.Owner, Addr: rec.Addr}, nil
			}
			if why == "" {
				why = "node " + rec.Owner + " is gone"
				if draining {
					why = "node " + rec.Owner + " is draining"
				}
			}
		} else if rec.Released && why == "" {
			why = "node " + rec.Owner + " drained"
		}
		if mv.Draining() {
			return cluster.AdoptResult{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "this node is draining").
				WithHint("adopt the session on another node")
		}
		won, err := own.Claim(ctx, id, rec.Epoch)
		if cur, fenced := sharedstore.Current(err); fenced {
			if cur.Owner == h.opts.ID {
				// A concurrent adopt on this node won: answer once the Manager holds the session.
				return h.whenHeld(ctx, id, me)
			}
			if attempt > 2 {
				return cluster.AdoptResult{Owner: cur.Owner, Addr: cur.Addr}, nil
			}
			if cur.Epoch > rec.Epoch {
				return cluster.AdoptResult{Owner: cur.Owner, Addr: cur.Addr}, nil // another node won
			}
			continue
		}
		if err != nil {
			return cluster.AdoptResult{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the shared store: %v", err)
		}
		notice := sandbox.Notice{Kind: sandbox.NoticeSessionMoved, FromNode: rec.Owner, ToNode: h.opts.ID, Reason: why}
		if rec.Owner == h.opts.ID {
			notice.Reason = "this node took it back after it was released"
		}
		info, err := mv.Adopt(id, won.Data, notice)
		if err != nil {
			// Give it up again for another node (or a later try); a lost state stays lost.
			rerr := own.Release(id)
			own.Forget(id)
			if rerr != nil {
				h.opts.Logger.Warn("adopt: a session this node won and could not take was not released", "session", id, "err", rerr)
			}
			return cluster.AdoptResult{}, err
		}
		h.opts.Logger.Info("session adopted", "session", id, "from", rec.Owner, "epoch", won.Epoch, "step", info.Head)
		me.Adopted, me.Step = true, info.Head
		return me, nil
	}
}

// whenHeld waits (a few seconds at most) until the Manager holds the session another adopt on
// this node just won, and answers with this node.
func (h *Handler) whenHeld(ctx context.Context, id string, me cluster.AdoptResult) (cluster.AdoptResult, error) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		if info, err := h.opts.Mover.Session(id); err == nil {
			me.Step = info.Head
			return me, nil
		}
	}
	return cluster.AdoptResult{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "session %s is being adopted by this node; it did not come up", id).
		WithHint("retry")
}

// ownerUp asks the owner's GET /v1/node whether it is there and whether it drains. Any HTTP
// answer but a NodeInfo saying it drains means it is there.
func (h *Handler) ownerUp(ctx context.Context, addr string) (alive, draining bool) {
	if addr == "" || strings.TrimRight(addr, "/") == h.opts.Addr {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, ownerCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+"/v1/node", nil)
	if err != nil {
		return false, false
	}
	if h.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.opts.Token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var info cluster.NodeInfo
	if resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info) == nil {
		return true, info.Draining
	}
	return true, false
}

// POST /v1/node/drain
func (h *Handler) drain(w http.ResponseWriter, r *http.Request) {
	released, err := h.opts.Mover.Drain(r.Context())
	res := cluster.DrainResult{Draining: true, Released: released}
	if res.Released == nil {
		res.Released = []string{}
	}
	if err != nil {
		res.Failed = fmt.Sprint(err)
	}
	h.opts.Logger.Info("node drained", "released", len(released), "err", err)
	WriteJSON(w, http.StatusOK, res)
}

// GET /v1/node/owner?session=ID: which node owns the session now, by its record in the shared
// store ({owner, addr}; adopted false), moving nothing: for the gateway, to follow a session that
// moved (its web console pages) when the node its id names is gone. Operators only (the cluster
// token or an admin key, as every node endpoint).
func (h *Handler) owner(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session")
	if id == "" {
		Fail(w, r, sandbox.Errorf(sandbox.KindInvalidRequest, "the session query parameter is required").
			WithHint("GET /v1/node/owner?session=sb_n1-..."))
		return
	}
	if info, err := h.opts.Mover.Session(id); err == nil {
		WriteJSON(w, http.StatusOK, cluster.AdoptResult{Owner: h.opts.ID, Addr: h.opts.Addr, Step: info.Head})
		return
	}
	rec, err := h.opts.Owners.Get(r.Context(), id)
	if errors.Is(err, sharedstore.ErrNotFound) {
		Fail(w, r, sandbox.Errorf(sandbox.KindNotFound, "session %s is not in the cluster's shared store (closed, or never created)", id))
		return
	}
	if err != nil {
		Fail(w, r, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the shared store: %v", err))
		return
	}
	WriteJSON(w, http.StatusOK, cluster.AdoptResult{Owner: rec.Owner, Addr: rec.Addr})
}
