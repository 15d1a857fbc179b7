// Package nodeapi is the front door only a cluster node has, mounted at /v1/node by one line in
// internal/daemon/http.go when the daemon serves with --role node: GET /v1/node says who the node
// is and what it could take now (cluster.NodeInfo), for the gateway's placement; POST
// /v1/node/adopt takes over a session whose owner is gone or drains (through the shared store's
// fenced claim, so of concurrent adopters one wins) and POST /v1/node/drain makes every session
// durable and releases it (adopt.go); GET /v1/node/owner?session=ID says which node owns a
// session now, moving nothing; GET /v1/node/audit/proof proves one of the node's audit
// records, so the gateway can check a record against the node's key before it shows it.
//
// Its routes need the cluster token (AGENTBOX_CLUSTER_TOKEN, which the gateway sends) or a key
// with the admin scope: they describe the whole node, every tenant's load included.
package nodeapi
