// Package gateway is the front door of `agentbox serve --role gateway`: a stateless process
// before a cluster of agentbox nodes. It authenticates every request with the same key store
// the nodes use and forwards it with the client's Authorization header unchanged (the node
// checks it again and applies the tenant's view), so a tenant meets the same answers, errors and
// isolation as on one machine.
//
// Where a request goes:
//
//   - one-shot runs (POST /v1/run, /v1/route) and new sessions (POST /v1/sessions): placement,
//     a node with a free warm sandbox of the routed tier first, else the least loaded; once more
//     on another node when the first refuses the connection before the request was sent;
//   - anything under /v1/sessions/{id}: the node the id names (sb_<node>-<hex>). When that node
//     is not in discovery, unhealthy, draining, or refuses the connection, POST /v1/node/adopt
//     on a healthy node (placement order), on behalf of the caller (the node adopts only a
//     session of the caller's tenant, else answers not_found and moves nothing), and forward to
//     the owner it names (the node's answer then carries the move notice);
//   - lists and reads that span nodes (GET /v1/sessions, /v1/artifacts/{id}, /v1/audit, /metrics)
//     fan out and merge; changes every node must see (egress reload, hosted MCP registry) fan
//     out to all;
//   - /mcp: by the session id a tool call names, else placement; the tools that list across
//     sessions (session_list, audit_query) are answered by Options.MCPLists (the MCP front door
//     over this gateway's own API, wired by the daemon), so they cover every node; /mcp/servers/NAME keeps an MCP
//     session on its node by prefixing its Mcp-Session-Id with the node's id;
//   - /ui/: a session's pages to the node its id names (or, when that node is gone or no longer
//     holds it, to the node that owns it now by the shared store: GET /v1/node/owner; a console
//     request moves nothing), an artifact to the node that has it,
//     the rest to the first healthy node in discovery's order (the nodes share the console's
//     logins through their shared storage, and list each other's sessions from it);
//   - /v1/volumes: any healthy node (a node's volumes are the cluster's, in the shared store).
//
// Capacity comes from each node's GET /v1/node, polled in the background (default every 500 ms,
// so at most a second stale); the only other state is counters of requests in flight per node.
// Nothing of it is needed for correctness: a second gateway, or this one restarted, answers the
// same. Streams (SSE, NDJSON) are copied with a flush per chunk, never buffered.
package gateway
