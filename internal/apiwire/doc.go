// Package apiwire is the API's wire layer, apart from any transport: it turns the public wire
// types (package api) into the core's (package sandbox) and back, and an error into its code,
// HTTP status and error body with the partial result the error carries.
//
// Every front door that speaks the API's types uses it: the HTTP API (internal/httpapi), the
// local engine of `agentbox run` (internal/cli), and the MCP and web-console front doors to come.
// So a request is read, and an error is answered, the same way whichever door it came through,
// and no front door imports another to get that.
// It also holds the two pieces every front door's request wrapper shares (request.go): the
// request id a client may give, and the writer that remembers the status for the log line.
package apiwire
