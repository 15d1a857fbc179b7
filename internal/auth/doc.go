// Package auth is the authentication every front door shares: the HTTP API today, the MCP
// server and the web console next. One package, so that a front door cannot come with a check
// of its own that is weaker or subtly different.
//
// A front door wraps each handler that needs a key with Bearer.Require, and says how a refusal
// is written in its own format; the refusal itself (kind unauthorized, its message and hint)
// is the same everywhere. Routes that need no key (GET /v1/health) are simply not wrapped.
package auth
