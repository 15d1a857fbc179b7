// Package mcpserver is agentbox as an MCP server: the daemon's front door at /mcp (streamable
// HTTP, stateless) and the stdio server of `agentbox mcp`, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk, protocol revision 2026-07-28 and the older ones it
// negotiates).
//
// # Tools
//
// Each tool is one operation of the HTTP API (api/openapi.yaml), in the API's own Go types:
//
//	run_code             POST /v1/run                     api.RunRequest          → api.Result
//	session_create       POST /v1/sessions                api.CreateSessionRequest → api.Session
//	session_run          POST /v1/sessions/{id}/run       SessionRunInput         → api.Result
//	session_list         GET /v1/sessions                 (none)                  → api.SessionList
//	session_close        DELETE /v1/sessions/{id}         SessionRef              → SessionClosed
//	file_write           PUT .../files/content            FileWriteInput          → FileWritten
//	file_read            GET .../files/content            FileRef                 → api.OutputFile
//	file_list            GET .../files                    FileListInput           → api.FileList
//	image_list           GET /v1/images                   (none)                  → api.ImageList
//	egress_intent_set    PUT .../intent                   IntentSetInput          → api.Intent
//	egress_intent_clear  DELETE .../intent                SessionRef              → api.Intent
//	audit_query          GET /v1/audit                    AuditQuery              → AuditRecords
//
// The input and output schemas are inferred from those Go types (github.com/google/jsonschema-go,
// as the SDK does) and their descriptions are read from the contract, so no schema is written by
// hand. The types of this package only add what a URL carries over HTTP (a session's id, a
// file's path, the audit filters), and embed the API's types for the rest.
//
// A run's result is its structured content (matching the output schema, api.Result) and, for a
// model to read, text content: stdout, stderr, the exception, the routing reasons; figures come
// as image content and rich values (a DataFrame) as text and as an embedded text/html resource.
// A failure is a tool error (isError) whose text is the API's error body, code and hint as
// package apiwire gives them.
//
// # Where the tools go
//
// The tools are written once over Backend, the API in its wire types. Over HTTP, each call is
// authenticated by the daemon's bearer keys (internal/auth, the same keys and scopes per
// operation as the HTTP API) and served by Local over the core's View of the key's caller, so
// ownership is the core's. `agentbox mcp` serves the same tools over stdio with the Go client of
// a running daemon as the Backend (the daemon then checks the key), or Local over an in-process
// engine when no daemon answers.
package mcpserver
