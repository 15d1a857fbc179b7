// Package e2bwire is what the E2B front door (internal/e2b) and its in-sandbox services
// (internal/e2b/envd, internal/e2b/interp) share: the one reversible mapping between E2B sandbox
// ids and agentbox session ids, the Target a service request was resolved to (the session, the
// port, who asks), the typed "not implemented" error that names an E2B call agentbox does not
// serve, and the E2B control plane's error body.
//
// It is a leaf: the front door imports the services to plug them in by port, and the services
// import this package, never the front door.
package e2bwire
