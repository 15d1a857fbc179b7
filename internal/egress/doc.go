// Package egress is the only way out of a sandbox: a forward proxy that every connection of a
// heavy sandbox with network enabled is carried to (the sandbox itself has no network device).
//
// A request passes, in order, everything that needs no network first, so that a request refused
// for what it carries causes no DNS query:
//
//  1. the policy of the sandbox's profile: deny rules, then allow rules (the profile's own and
//     those of the session's current intent), else denied — domains with wildcards, ports,
//     methods and URL path prefixes;
//  2. the host-name checks (hostcheck.go), on the name as the sandbox sent it: DLP on the name,
//     upper-cased, its subdomain labels joined and decoded from base32; the length of each label
//     and of the name; the entropy of each label and of the subdomain part; the session's budget
//     of distinct subdomains under one registrable domain (the public suffix list compiled into
//     golang.org/x/net/publicsuffix, pinned by go.mod);
//  3. DLP on the URL, headers and body (package dlp): block, redact or log per detector;
//  4. high-entropy tokens in the path, the query and the headers (entropy.go): log or block;
//  5. the bytes the session has sent to the destination (its registrable domain) against the
//     profile's limit (session.go), counted again as the body streams;
//  6. the SSRF guard: the proxy resolves the name itself, refuses loopback, private, link-local
//     (cloud metadata), CGNAT, ULA, multicast and unspecified addresses (IPv4-mapped forms
//     included) and dangerous ports, and dials the very address it checked, so DNS rebinding has
//     no window.
//
// The response then passes the response scanner (respscan.go, package promptscan): a text
// response holding instructions addressed to the model (hidden HTML text, invisible Unicode,
// known injection phrasings) is annotated with an X-Agentbox-Warning header, blocked or logged.
//
// HTTPS is intercepted (CONNECT, then TLS with a certificate for the host signed on the fly by a
// per-installation CA the sandbox trusts), so rules on methods and paths and DLP apply to it too;
// hosts a policy marks as pass-through are tunnelled by SNI without interception. The CONNECT's
// host name is checked before anything: a name refused there is refused for every request in the
// tunnel, whatever their Host headers say.
//
// Modes per profile: disabled (no policy, DLP or other checks; the SSRF guard still holds, since
// it protects the host, not the data), warn (everything is decided and recorded, nothing is
// blocked or changed, so a name that would be refused is resolved) and enforce.
//
// Records hold no secrets (redact.go): every event is redacted before it is recorded, logged,
// counted towards an alert or sent to a webhook, whatever its decision and whichever checks ran.
//
// State is per node: the gateway keeps each session's intent, violation counters, subdomains and
// bytes sent in memory. docs/PROFILES.md is the reference of the profile settings and their
// costs.
package egress
