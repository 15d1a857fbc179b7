// Package testenv lets tests that need privileges or host tools announce
// themselves: they run by default where the thing is available and skip with
// the reason where it is not, unless the environment variable
// AGENTBOX_REQUIRE_PRIVILEGED=1 (set by CI on machines that have everything)
// turns such a skip into a failure.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// RequirePrivilegedEnv is the environment variable that turns skips for
// missing privileges or tools into failures when set to "1".
const RequirePrivilegedEnv = "AGENTBOX_REQUIRE_PRIVILEGED"

// Required reports whether missing privileges must fail tests instead of
// skipping them.
func Required() bool { return os.Getenv(RequirePrivilegedEnv) == "1" }

// Skip skips t with reason, or fails it if Required.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (and %s=1 forbids skipping)", reason, RequirePrivilegedEnv)
	}
	t.Skip(reason)
}

// RequireRoot skips t (or fails it, see Required) unless the test runs as
// root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (namespaces, mounts, uid changes)")
	}
}

// RequireTool skips t (or fails it, see Required) unless the named program
// is on PATH, and returns its path.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(t, "needs "+name+" on PATH")
	}
	return p
}
