package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/agentbox-dev/agentbox/internal/cli.Version=v1.2.3". Empty means: ask
// the build information (a module version when installed with go install), else "dev".
var Version = ""

// version is the bare version string, as GET /v1/health reports it.
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// VersionString is the version with the toolchain and platform, for `agentbox version`.
func VersionString() string {
	return fmt.Sprintf("%s (%s %s/%s)", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
