// Package egress is the only way out of a sandbox: a forward proxy that every connection of a
// heavy sandbox with network enabled is carried to (the sandbox itself has no network device).
//
// A request passes, in order:
//
//  1. the policy of the sandbox's profile: deny rules, then allow rules (the profile's own and
//     those of the session's current intent), else denied — domains with wildcards, ports,
//     methods and URL path prefixes;
//  2. the SSRF guard: the proxy resolves the name itself, refuses loopback, private, link-local
//     (cloud metadata), CGNAT, ULA, multicast and unspecified addresses (IPv4-mapped forms
//     included) and dangerous ports, and dials the very address it checked, so DNS rebinding has
//     no window;
//  3. DLP on the URL, headers and body: block, redact or log per detector.
//
// HTTPS is intercepted (CONNECT, then TLS with a certificate for the host signed on the fly by a
// per-installation CA the sandbox trusts), so rules on methods and paths and DLP apply to it too;
// hosts a policy marks as pass-through are tunnelled by SNI without interception.
//
// Modes per profile: disabled (no policy or DLP; the SSRF guard still holds, since it protects
// the host, not the data), warn (everything is decided and recorded, nothing is blocked or
// changed) and enforce.
//
// State is per node: the gateway keeps each session's intent and violation counters in memory.
package egress
