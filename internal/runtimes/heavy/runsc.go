package heavy

// RunscVersion is the gVisor module version runsc is built from. It must equal the version of
// gvisor.dev/gvisor that go.mod requires (a `tool gvisor.dev/gvisor/runsc` directive pins it
// there); TestRunscVersionMatchesGoMod holds the two together. notes/gvisor.md has the figures
// measured with it.
const RunscVersion = "v0.0.0-20260905035102-160fafc42237"

// RunscModule is the package built.
const RunscModule = "gvisor.dev/gvisor/runsc"
