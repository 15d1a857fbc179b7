// Package api holds the JSON types of agentbox's HTTP API, shared by the daemon's front doors
// (internal/httpapi; internal/apiwire converts them to the core's types), the Go client (client)
// and the tests. The contract itself is api/openapi.yaml (embedded here as OpenAPI); these types
// follow it field for field, and a test keeps the two in step.
//
// Units on the wire are chosen for people writing JSON by hand: timeouts in seconds (a number, so
// 0.5 works), memory in MiB, output and file limits in bytes, timings in milliseconds. File
// contents are base64 (standard alphabet, padded), as encoding/json writes a []byte.
//
// The package imports only the standard library so that any Go program can use it.
package api
