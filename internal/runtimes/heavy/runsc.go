package heavy

// RunscVersion is the gVisor module version runsc is built from. It must equal the version of
// gvisor.dev/gvisor that go.mod requires (a `tool gvisor.dev/gvisor/runsc` directive pins it
// there); TestRunscVersionMatchesGoMod holds the two together. notes/gvisor.md has the figures
// measured with it.
const RunscVersion = "v0.0.0-20260905035102-160fafc42237"

// RunscModule is the package built outside the source tree (upstream runsc).
const RunscModule = "gvisor.dev/gvisor/runsc"

// RunscMain is the package built in the source tree: runsc with a main of our own that returns
// an idle sentry's free heap to the kernel (cmd/agentbox-runsc). RunscBuild is the first line of
// its `--version` output, by which setup tells it from an upstream build or an older one of ours;
// cmd/agentbox-runsc's tests hold the two together.
const (
	RunscMain  = "./cmd/agentbox-runsc"
	RunscBuild = "agentbox-runsc 14"
)
