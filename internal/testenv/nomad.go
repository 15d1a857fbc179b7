package testenv

import "testing"

var nomadInstall = npmInstall{
	script: "scripts/cluster/nomad-build.sh",
	what:   "Nomad, built from its Go module",
	from:   "the Go module proxy",
}

// RequireNomad returns the path of the Nomad binary, built once per machine by
// scripts/cluster/nomad-build.sh (cached by version outside the checkout; cold it takes minutes,
// so scripts/test.sh builds it before the tests). It skips t (or fails it, see Required) only
// when the Go module proxy cannot be reached, and needs root (Nomad's clients run agentbox).
func RequireNomad(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	return nomadInstall.dir(t)
}
