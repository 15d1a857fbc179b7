package testenv

import "testing"

var seaweedInstall = npmInstall{
	script: "scripts/cluster/seaweedfs-build.sh",
	what:   "SeaweedFS (an S3-compatible server), built from its Go module",
	from:   "the Go module proxy",
}

// RequireSeaweedFS returns the path of SeaweedFS's `weed` binary, the S3-compatible server the
// shared store's tests run, built once per machine by scripts/cluster/seaweedfs-build.sh (cached
// by version outside the checkout; cold it takes minutes, so scripts/test.sh builds it before
// the tests). It skips t (or fails it, see Required) only when the Go module proxy cannot be
// reached.
func RequireSeaweedFS(t testing.TB) string {
	t.Helper()
	return seaweedInstall.dir(t)
}
