package cluster

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Node is one agentbox node as discovery sees it.
type Node struct {
	// ID is the node's id (--node-id), the one its session ids carry.
	ID string `json:"id"`
	// Addr is the node's base URL, e.g. http://10.0.0.5:8421.
	Addr string `json:"addr"`
	// Healthy is the engine's view (Nomad's or Kubernetes' health checks); the gateway adds its
	// own from the node's answers.
	Healthy bool `json:"healthy"`
	// Source names the discovery kind that found it (static, nomad, kube).
	Source string `json:"source"`
}

// Discovery lists the cluster's nodes. Implementations are safe for concurrent use and cheap to
// call often (the gateway asks on every placement): they cache or watch inside, at most a second
// stale. An error means the list cannot be known now; an empty list is a cluster without nodes.
type Discovery interface {
	Nodes(ctx context.Context) ([]Node, error)
}

// nodeIDPattern is what a node id may be: short, lowercase, and free of the "-" that ends it in a
// session id.
var nodeIDPattern = regexp.MustCompile(`^[a-z0-9]{1,32}$`)

// ValidNodeID says whether id can name a node, and what to do when not.
func ValidNodeID(id string) error {
	if !nodeIDPattern.MatchString(id) {
		return fmt.Errorf("node id %q: use 1 to 32 lowercase letters and digits ([a-z0-9]{1,32}), e.g. n1", id)
	}
	return nil
}

// SessionPrefix is how the session ids of node starts: "sb_<node>-". The Manager of a node
// writes its ids with it (sandbox.ManagerOptions.NodeID); a single machine's ids are "sb_<hex>".
func SessionPrefix(node string) string { return "sb_" + node + "-" }

// NodeOfSession returns the node a session id names, if it names one.
func NodeOfSession(id string) (node string, ok bool) {
	rest, found := strings.CutPrefix(id, "sb_")
	if !found {
		return "", false
	}
	node, hex, found := strings.Cut(rest, "-")
	if !found || hex == "" || !nodeIDPattern.MatchString(node) {
		return "", false
	}
	return node, true
}

// NodeInfo is what a node says of itself at GET /v1/node: who it is and what it could take now.
// Reading it touches no sandbox.
type NodeInfo struct {
	ID       string    `json:"id"`
	Addr     string    `json:"addr,omitempty"`
	Version  string    `json:"version"`
	Role     string    `json:"role"`
	Draining bool      `json:"draining"`
	Started  time.Time `json:"started"`
	// Tiers is each tier this node runs, by name.
	Tiers map[string]TierInfo `json:"tiers"`
	// Sessions is the node's open sessions, all tiers.
	Sessions int `json:"sessions"`
	// MemAvailableBytes is the machine's MemAvailable (/proc/meminfo); Load1 its 1-minute load.
	MemAvailableBytes int64   `json:"mem_available_bytes"`
	Load1             float64 `json:"load1"`
	// AuditKey is the verifier key of the node's audit log (sumdb/note form), "" when it keeps
	// none: the gateway checks inclusion proofs' checkpoints with it.
	AuditKey string `json:"audit_key,omitempty"`
}

// TierInfo is one tier's capacity on a node.
type TierInfo struct {
	// WarmFree counts sandboxes started ahead and free now, by image ("default" for a tier
	// without images): a run or session placed here starts in one of them.
	WarmFree map[string]int `json:"warm_free"`
	// WarmSessions, when the tier keeps sandboxes for new sessions apart from those of one-shot
	// runs, counts those by image; absent, WarmFree serves both.
	WarmSessions map[string]int `json:"warm_sessions,omitempty"`
	// Sessions is the tier's open sessions; MaxSessions the node's cap on sessions (all tiers).
	Sessions    int `json:"sessions"`
	MaxSessions int `json:"max_sessions"`
}

// Warm is the tier's free warm sandboxes over every image.
func (t TierInfo) Warm() int {
	n := 0
	for _, v := range t.WarmFree {
		n += v
	}
	return n
}
