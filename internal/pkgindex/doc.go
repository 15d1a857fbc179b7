// Package pkgindex is a small PEP 503 simple package index and the pure-Python wheels it serves,
// built in memory with archive/zip: what the heavy tier's packages-on-demand test and
// `agentbox bench packages` install from, instead of a real index this machine cannot reach.
package pkgindex
