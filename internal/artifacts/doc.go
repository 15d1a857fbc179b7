// Package artifacts keeps what runs produced besides their output (figures, mostly) on this node's
// disk until a client fetches them. Results carry only an artifact's ID, size and hash, so a
// result stays small however many charts a run draws.
//
// The store is per-node state under DATA_DIR/artifacts: a gateway in front of several nodes must
// send an artifact request to the node that ran the code (the ID does not say which; the gateway
// keeps that mapping).
package artifacts
