// Package kube finds agentbox nodes through Kubernetes: the EndpointSlices of a Service that
// selects the node pods (deploy/k8s: a headless Service in front of the DaemonSet), watched with
// client-go, so the gateway learns of a node pod that starts, turns ready, terminates or is gone
// within a watch event's delay instead of a poll's.
//
// A node's id is its pod's name kept to [a-z0-9] and its last 32 characters (NodeID; the pod's
// entrypoint computes the same from POD_NAME), so a pod that replaces another on the same host
// is a new node and the sessions of the old one are adopted, not confused with it.
//
// Health comes from the engine: an endpoint is healthy when its slice says ready and not
// terminating and, when the gateway may read Nodes, the Kubernetes node it runs on is Ready. The
// gateway adds its own view from the nodes' answers (GET /v1/node).
//
// The spec is kube:NAMESPACE/SERVICE[:PORT] (PORT a port name or number of the Service, default
// the port named "http", else the first). Inside a pod the client uses the pod's service
// account; elsewhere KUBECONFIG or ~/.kube/config.
package kube
