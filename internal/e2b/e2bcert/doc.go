// Package e2bcert makes a throwaway certificate authority and a server certificate of it, for
// the E2B front door's tests and benchmark: E2B's SDKs speak HTTPS, and trust this CA through
// NODE_EXTRA_CA_CERTS. Never for production (the keys sit in a temporary directory).
package e2bcert
