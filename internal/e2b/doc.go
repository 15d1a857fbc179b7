// Package e2b is the E2B front door: it answers what E2B's official SDKs (`e2b`,
// `@e2b/code-interpreter`, and their Python twins) call, so that a program written for E2B runs
// against agentbox with only E2B_DOMAIN and E2B_API_KEY changed.
//
// The SDKs address two kinds of host under one domain: `api.<domain>`, the control plane
// (sandboxes: create from a template, get, list, timeout, kill, pause, connect), and
// `<port>-<sandbox id>.<domain>`, a service inside one sandbox (envd on 49983: commands and files;
// the code interpreter on 49999: execute and contexts). Handler dispatches by the Host header; the
// SDKs also name the sandbox and port in the headers E2b-Sandbox-Id and E2b-Sandbox-Port on every
// in-sandbox request, which lets one address serve everything (E2B_API_URL and E2B_SANDBOX_URL
// pointed at it, no wildcard name needed) and serves the SDKs' debug mode.
//
// A sandbox is an agentbox session (e2bwire.SandboxID maps the ids); templates map to a tier and
// an image. The SDK's API key (X-API-Key) is an agentbox key: its tenant owns the sandboxes it
// makes and another tenant's are not found. Create and connect hand out the sandbox's access
// tokens, bound to the session and the key (an HMAC under a secret of the daemon), which the SDK
// sends to the in-sandbox services; a service request is resolved to its session and caller
// (e2bwire.Target) before internal/e2b/envd or internal/e2b/interp sees it, so those services
// act through the engine as that caller, with agentbox's limits, egress governance and audit.
//
// Every call the SDKs make that agentbox does not serve is answered with the typed error
// e2bwire.NotImplemented, which names the call (docs/E2B.md has the table).
package e2b
