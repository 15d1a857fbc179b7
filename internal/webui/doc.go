// Package webui is the web console, the daemon's third front door, served at /ui/ beside the HTTP
// API (/v1/) and MCP (/mcp): a person's view of the sessions, their steps and the audit log.
//
// It is server-rendered HTML (html/template) with one small script and one style sheet, all
// embedded in the binary (embed.FS): nothing is fetched from elsewhere when a page loads, and
// nothing is fetched at build time.
//
// # Who sees what
//
// A person logs in with an API key, the same keys as /v1 (internal/auth). The console keeps the
// key in a server-side table of UI sessions and gives the browser only a random session id in an
// HttpOnly, SameSite=Strict cookie (Secure over TLS), never the key. Every request authenticates
// the kept key again, so a key revoked or expired with `agentbox keys` stops its UI sessions at
// their next click, and the key's tenant and scopes apply as on /v1: every engine call goes
// through the caller's sandbox.View, where another tenant's sessions, artifacts and records are
// not found. A UI session ends at logout, after IdleTimeout without a request, or at MaxAge.
//
// # Changes
//
// Every state change is a POST that carries the UI session's synchronizer token (a random
// value bound to the session, compared in constant time), and passes net/http's cross-origin
// protection (Sec-Fetch-Site, else Origin against Host). The login form has its own token,
// double-submitted in a short-lived cookie. A POST without the cookie, or with a missing or wrong
// token, is refused with 401 or 403 and changes nothing.
//
// # Headers
//
// Every answer carries a strict Content-Security-Policy (default-src 'self', no inline script or
// style, frame-ancestors 'none', form-action 'self'), X-Content-Type-Options: nosniff,
// Referrer-Policy: no-referrer and Cache-Control: no-store for pages. Output the user's code
// made (a DataFrame's HTML, stdout) is never inserted as HTML: a DataFrame is drawn from its JSON
// table, everything else is escaped text, and figures are images served from the artifact store
// with their own restrictive policy.
package webui
