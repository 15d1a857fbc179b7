// Package mcphost runs third-party MCP servers for agentbox, each in a heavy (gVisor) sandbox of
// its own, and governs every call to them.
//
// A server is registered by name (`agentbox mcp add NAME --image IMAGE [--profile P] -- CMD...`,
// stored in DATA_DIR/mcp/servers.json, read again whenever another process such as the CLI
// rewrites it). Its process is started on first use (heavy.Runtime.Spawn:
// a sandbox of the image, the command's stdin and stdout host pipes passed into it), kept warm,
// started again after it ended (a crash), and stopped after Options.Idle without calls. Its
// network is the egress gateway's with its profile; without one it has none (--network=none and
// no tunnel).
//
// Every call (Manager.Call) passes, in order:
//   - pinning: the server's first tools/list is recorded in DATA_DIR/mcp/pins/NAME.json, each
//     tool's definition (name, title, description, schemas, annotations) hashed and the whole
//     bound to the image's hash. A later list that differs (a "rug pull", or a new image) makes
//     every call of the server refused until `agentbox mcp approve NAME` pins the new list; each
//     pin and approval is an audit record;
//   - the allow and deny lists (governance.go) of the server's configuration, of its egress
//     profile (`mcp.tools`; the `default` profile's for a server without one, which still has
//     no network) and of the current intent's (`intents.NAME.mcp.tools`), and of the profile and
//     intent of a session the call names. Deny wins; every allow list that is set must admit the
//     tool, except that an intent's allow list opens tools its profile's does not name. A denied
//     call gets a refusal naming the list;
//   - the intent: the one the call names (_meta "agentbox/intent" or the header
//     X-Agentbox-Intent), else the current intent of the session it names ("agentbox/session",
//     X-Agentbox-Session; the caller's own sessions only). While the call runs it is the intent of
//     the server's own traffic at the egress gateway (session "mcp:NAME"); calls under different
//     intents take turns;
//   - DLP of the arguments (internal/dlp) with the dlp actions of each profile of the call (the
//     default actions without a gateway): a card number or a key blocks the call before the
//     server sees it under the shipped profiles;
//   - DLP of the result: everything found is redacted (an AWS key read from a file comes back as
//     [REDACTED:secret...]);
//   - prompt-injection scanning (internal/promptscan) of the tool descriptions when pinned and of
//     the result text. Under `mcp.prompt_scan: flag` (the default) a hit is served with the
//     rules in the tool's or the result's _meta ("agentbox/flagged") and recorded; under `block`
//     (any profile of the call) a flagged tool is left out of tools/list and refused, and a
//     flagged result is withheld;
//   - violations (a denied tool, blocked arguments, refused definitions, a blocked description
//     or result) count towards the egress monitor's alerts (egress.Gateway.Violation): against
//     the session the call names, which the profile's alerts.end_session may end, else against
//     the server;
//   - an audit record (DATA_DIR/mcp/audit.jsonl, and through Options.Audit the daemon's signed
//     audit log, kinds mcp.call, mcp.pin, mcp.refused, mcp.approve): server, tool, SHA-256 of the
//     arguments and of the result, excerpts of both with every finding redacted, decision,
//     reason, duration.
//
// Handler serves one server at /mcp/servers/NAME as an MCP server of its own (streamable HTTP
// with sessions bound to the key that opened them, sessions.go) whose tools are the hosted
// server's, each call governed as above, and which carries the server's resource subscriptions
// and its list-changed notifications (listchanged.go: a tool list that changes while the server
// runs is listed again by the gateway and held to the pin, refused until approved). The daemon also
// lists every server's tools on its own /mcp as NAME__tool (internal/mcpserver's Hosted).
package mcphost
