package cluster

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// AdoptRequest is the body of a node's POST /v1/node/adopt.
type AdoptRequest struct {
	Session string `json:"session"`
	// Reason says why the caller asks (written into the session's notice), e.g. "node a is gone".
	Reason string `json:"reason,omitempty"`
	// For is the client on whose behalf the gateway asks (the caller of the request that found
	// the session's node gone). Given, the node adopts, and names the owner of, only a session
	// that caller may see (its tenant's; any, for an admin): another tenant's is not_found and
	// stays where it is. Absent (an operator with the cluster token or an admin key), any session.
	For *AdoptCaller `json:"for,omitempty"`
}

// AdoptCaller is who a gateway adopts a session for: the tenant its API key names, or an admin,
// as sandbox.View decides ownership on a node.
type AdoptCaller struct {
	Tenant string `json:"tenant"`
	Admin  bool   `json:"admin,omitempty"`
}

// Owns says whether c may see a session of tenant (a nil c is an operator: any).
func (c *AdoptCaller) Owns(tenant string) bool { return c == nil || c.Admin || c.Tenant == tenant }

// AdoptResult is its answer: who owns the session now and where to send its requests. Adopted
// says this call moved it here; Step is the step it resumes from (when it is this node's).
type AdoptResult struct {
	Owner   string `json:"owner"`
	Addr    string `json:"addr"`
	Adopted bool   `json:"adopted"`
	Step    string `json:"step,omitempty"`
}

// DrainResult is the answer of a node's POST /v1/node/drain: the sessions it gave up, each now
// adoptable by another node at its latest durable step.
type DrainResult struct {
	Draining bool     `json:"draining"`
	Released []string `json:"released"`
	// Failed names sessions that could not be released, with why.
	Failed string `json:"failed,omitempty"`
}

// Successors orders nodes by who should adopt session if its node is lost (rendezvous hashing:
// each node's rank is a hash of the session and the node, so every process that knows the same
// nodes orders them alike, and a node joining or leaving moves only the sessions it ranks
// first). The gateway asks nodes to adopt in this order; a node of a shared store that keeps
// snapshots remotely fetches ahead the latest snapshots of the sessions it ranks high for
// (sharedstore.S3.Prefetch), so that a move finds them on its disk. nodes is not changed.
func Successors(session string, nodes []string) []string {
	out := slices.Clone(nodes)
	rank := func(n string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(session))
		h.Write([]byte{0})
		h.Write([]byte(n))
		x := h.Sum64() // FNV alone clusters on ids that differ in their last bytes: mixed
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		return x ^ x>>31
	}
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(rank(b), rank(a)) })
	return out
}
