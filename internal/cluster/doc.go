// Package cluster holds the types every part of agentbox's scale-out shares: a Node as discovery
// finds it, the Discovery interface the gateway reads nodes through, the registry of discovery
// kinds parsed from one flag (--discovery static:..., nomad:SERVICE, kube:NAMESPACE/SERVICE),
// NodeInfo (the JSON of a node's GET /v1/node) and the rule by which a session id names its node
// (sb_<node>-<hex>).
//
// It holds no policy: placement and proxying are the gateway's (internal/gateway), a node's own
// endpoints are internal/nodeapi's, and each discovery kind lives in a package of its own,
// listed once in the daemon's wiring (daemon.discoveryKinds), as the tiers are.
package cluster
