package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/s3"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Fetching ahead. With the snapshots in a bucket, a session that moves to a node would first
// have its latest snapshot come down to that node (a heavy checkpoint: ~150 MB, a second or more
// on a busy machine) before its restore could start. So each node keeps in its cache the latest
// durable snapshot of the sessions it would adopt: the sessions of other nodes for which it is
// among the first PrefetchSuccessors of cluster.Successors (over the nodes that own sessions in
// the store, and itself), the order in which the gateway asks nodes to adopt. A move then
// restores from the node's disk, as over a shared directory.

// PrefetchSuccessors is how many nodes fetch each session's latest snapshot ahead.
const PrefetchSuccessors = 2

// Prefetch fetches ahead, for node, until ctx ends: every interval it lists the records (one
// listing), reads those that changed since, and fetches into this node's cache the snapshot each
// such session would resume from, if node is one of its successors. Errors are logged and
// retried at the next round.
func (s *S3) Prefetch(ctx context.Context, node string, interval time.Duration, log *slog.Logger) {
	p := &prefetcher{s: s, node: node, log: log, seen: map[string]string{}, owner: map[string]string{}}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type prefetcher struct {
	s    *S3
	node string
	log  *slog.Logger
	// seen is each session's latest record object as last handled (key and ETag); owner its
	// owner then.
	seen  map[string]string
	owner map[string]string
}

// round is one listing and the fetches it calls for.
func (p *prefetcher) round(ctx context.Context) {
	type latest struct {
		epoch uint64
		tag   string
	}
	now := map[string]latest{}
	ns := p.s.ns + "/"
	_, err := p.s.c.List(ctx, ns, func(o s3.Object) error {
		id, name, ok := strings.Cut(strings.TrimPrefix(o.Key, ns), "/")
		n, _ := strings.CutSuffix(name, ".json")
		if v, err := strconv.ParseUint(n, 10, 64); ok && err == nil && v >= now[id].epoch {
			now[id] = latest{v, o.Key + " " + o.ETag}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("prefetch: listing the records", "err", err)
		}
		return
	}
	for id := range p.seen {
		if _, ok := now[id]; !ok {
			delete(p.seen, id)
			delete(p.owner, id)
		}
	}
	for id, l := range now {
		if ctx.Err() != nil {
			return
		}
		if p.seen[id] == l.tag {
			continue
		}
		b, _, err := p.s.c.GetBytes(ctx, p.s.recordKey(id, l.epoch))
		if errors.Is(err, s3.ErrNotFound) {
			continue // claimed or closed since the listing: the next round sees
		}
		if err != nil {
			p.log.Debug("prefetch: reading a record", "session", id, "err", err)
			continue
		}
		var rec Record
		if json.Unmarshal(b, &rec) != nil {
			p.seen[id] = l.tag
			continue
		}
		p.owner[id] = rec.Owner
		if rec.Owner == p.node || !p.successor(id, rec.Owner) {
			p.seen[id] = l.tag
			continue
		}
		ref := sandbox.RecordResumeRef(rec.Data)
		if ref == "" {
			p.seen[id] = l.tag
			continue
		}
		start := time.Now()
		n, err := p.s.snaps.Prefetch(ref)
		if err != nil {
			p.log.Debug("prefetch: a session's latest snapshot", "session", id, "err", err)
			continue // again at the next round
		}
		p.seen[id] = l.tag
		if n > 0 {
			p.log.Debug("prefetched a session's latest snapshot", "session", id, "bytes", n, "took", time.Since(start))
		}
	}
}

// successor says whether this node is among the first PrefetchSuccessors to adopt the session
// if its owner is lost, over the nodes that own sessions now and this one.
func (p *prefetcher) successor(id, owner string) bool {
	nodes := []string{p.node}
	for _, o := range p.owner {
		if o != owner && o != "" && !slices.Contains(nodes, o) {
			nodes = append(nodes, o)
		}
	}
	order := cluster.Successors(id, nodes)
	return slices.Index(order, p.node) < PrefetchSuccessors
}
