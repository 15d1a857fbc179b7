package daemon

import (
	"context"
	"errors"
	"hash/fnv"
	"net"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/httpapi"
	"github.com/agentbox-dev/agentbox/internal/nodeapi"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
)

// A cluster node keeps what it owns under DATA_DIR/nodes/ID (config.StatePath: sessions, the
// heavy tier's state, its audit log, artifacts, volumes, hosted MCP servers), so that several
// nodes share one data directory's artifacts on one machine. What else two daemons on one
// machine would share is set apart here.

// nodeID is the id the Manager writes into its session ids: the node's, or none.
func nodeID(cfg config.Config) string {
	if cfg.Cluster.Role == config.RoleNode {
		return cfg.Cluster.NodeID
	}
	return ""
}

// workerUIDs is the first uid of the nano tier's workers: the tier's default on a single machine;
// on a node, a range of 8192 of its own picked by its id above 100000, so that two nodes on one
// machine do not share uids (RLIMIT_NPROC counts per uid). Two ids landing on one range (1 in
// 4096 for a pair) only share that count again, as workers of one daemon did before slots.
func workerUIDs(cfg config.Config) int {
	id := nodeID(cfg)
	if id == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return 100000 + int(h.Sum32()%4096)*8192
}

// NodeOptions are what a cluster node's own endpoints say of it (FrontDoorOptions.Node).
type NodeOptions struct {
	// ID is the node's id, Addr the base URL it advertises.
	ID, Addr string
	// Token is the cluster token the gateway sends; "" accepts admin keys only.
	Token string
	// Started is when the node started.
	Started time.Time
}

// NodeOptionsOf is the node part of the front doors for cfg's role: nil unless cfg is a node's.
// A node that advertises no address says http:// + the address it listens on.
func NodeOptionsOf(cfg config.Config, listen net.Addr) *NodeOptions {
	if cfg.Cluster.Role != config.RoleNode {
		return nil
	}
	addr := cfg.Cluster.Advertise
	if addr == "" && listen != nil {
		addr = "http://" + listen.String()
	}
	return &NodeOptions{ID: cfg.Cluster.NodeID, Addr: strings.TrimRight(addr, "/"), Token: cfg.Cluster.Token, Started: time.Now()}
}

// newNodeAPI builds the node's endpoints over the engine.
func newNodeAPI(m httpapi.Engine, keys *auth.Keys, opts FrontDoorOptions) *nodeapi.Handler {
	no := nodeapi.Options{ID: opts.Node.ID, Addr: opts.Node.Addr, Version: opts.Version, Started: opts.Node.Started,
		Keys: keys, Token: opts.Node.Token, Logger: opts.Logger}
	if e, ok := m.(nodeapi.Engine); ok {
		no.Engine = e
	}
	// Moving sessions: the Manager adopts and drains, over its records in the shared store.
	if mv, ok := m.(nodeapi.Mover); ok {
		no.Mover = mv
		if r, ok := m.(interface{ Records() sandbox.SessionRecords }); ok {
			if own, ok := r.Records().(nodeapi.Owners); ok {
				no.Owners = own
			}
		}
	}
	if a, ok := m.(*sandbox.Audited); ok {
		if l := auditLogOf(a.Sink()); l != nil {
			no.AuditKey, no.Prove = l.PublicKey(), proveIn(l)
		}
	}
	return nodeapi.New(no)
}

// proveIn proves a record of l, signing a checkpoint first when the record is newer than the
// last one (so a record just written can be proved at once).
func proveIn(l *audit.Log) func(ctx context.Context, seq int64) (*audit.Proof, error) {
	return func(ctx context.Context, seq int64) (*audit.Proof, error) {
		p, err := audit.Prove(ctx, l.Dir(), l.PublicKey(), seq)
		if errors.Is(err, audit.ErrNotSigned) && seq < l.Records() {
			if err := l.Checkpoint(); err != nil {
				return nil, err
			}
			p, err = audit.Prove(ctx, l.Dir(), l.PublicKey(), seq)
		}
		if errors.Is(err, audit.ErrNotSigned) {
			return nil, sandbox.Errorf(sandbox.KindNotFound, "the audit log has no record %d", seq).
				WithHint("records are numbered from 0; GET /v1/audit lists them with their seq")
		}
		return p, err
	}
}

// otherNodesSessions lists, for the console of a cluster's node, the sessions other nodes hold
// that a caller may see: from the shared store's records (nil off a cluster).
func otherNodesSessions(m any) func(ctx context.Context, c sandbox.Caller) []sandbox.SessionInfo {
	r, ok := m.(interface{ Records() sandbox.SessionRecords })
	if !ok {
		return nil
	}
	lister, ok := r.Records().(interface {
		List(ctx context.Context) ([]sharedstore.Record, error)
	})
	if !ok {
		return nil
	}
	return func(ctx context.Context, c sandbox.Caller) []sandbox.SessionInfo {
		recs, err := lister.List(ctx)
		if err != nil {
			return nil
		}
		var out []sandbox.SessionInfo
		for _, rec := range recs {
			info, err := sandbox.RecordInfo(rec.Data)
			if err != nil || info.ID != rec.Session || !c.Admin && c.Tenant != info.Tenant {
				continue
			}
			out = append(out, info)
		}
		return out
	}
}
