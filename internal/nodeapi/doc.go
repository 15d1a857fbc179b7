// Package nodeapi is the front door only a cluster node has, mounted at /v1/node by one line in
// internal/daemon/http.go when the daemon serves with --role node: GET /v1/node says who the node
// is and what it could take now (cluster.NodeInfo), for the gateway's placement; adopting and
// draining sessions come beside it.
//
// Its routes need the cluster token (AGENTBOX_CLUSTER_TOKEN, which the gateway sends) or a key
// with the admin scope: they describe the whole node, every tenant's load included.
package nodeapi
