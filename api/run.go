package api

import "time"

// Runtimes a request may name.
const (
	// RuntimeAuto lets the daemon's router pick a tier from the code's imports. The default.
	RuntimeAuto = "auto"
	// RuntimeNano is CPython compiled to WebAssembly in a jailed worker: starts in milliseconds,
	// standard library only, no network.
	RuntimeNano = "nano"
	// RuntimeHeavy is a gVisor sandbox with a Debian userland (numpy, pandas, matplotlib).
	RuntimeHeavy = "heavy"
)

// RunRequest is the body of POST /v1/run and POST /v1/sessions/{id}/run. Every field but Code is
// optional; a zero limit means the server's default, and a limit above the server's maximum is
// refused with invalid_request (the message names the maximum).
type RunRequest struct {
	// Code is the Python source to run. Required, not blank.
	Code string `json:"code"`
	// Runtime is "auto" (default), "nano" or "heavy". In a session run it must be empty or the
	// session's runtime.
	Runtime string `json:"runtime,omitempty"`
	// Timeout is the wall-clock budget of the code in seconds (fractions allowed).
	Timeout float64 `json:"timeout,omitempty"`
	// MemoryMB caps the guest's memory in MiB. Not allowed in session runs (set it on the session).
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// StdoutLimit and StderrLimit cap what is kept of each stream, in bytes; the rest is dropped
	// and the result says so (stdout_truncated, stderr_truncated). Not allowed in session runs.
	StdoutLimit int64 `json:"stdout_limit,omitempty"`
	StderrLimit int64 `json:"stderr_limit,omitempty"`
	// FilesLimit caps the sandbox's private file system (input files plus what the code writes),
	// in bytes. Not allowed in session runs.
	FilesLimit int64 `json:"files_limit,omitempty"`
	// Files are written into the sandbox before the code starts. Relative paths land in
	// /home/user, the directory the code starts in.
	Files []InputFile `json:"files,omitempty"`
	// Env is the code's environment.
	Env map[string]string `json:"env,omitempty"`
	// Deterministic, when set, fixes the clock and the random source so that the same request
	// gives the same output.
	Deterministic *Deterministic `json:"deterministic,omitempty"`
	// Packages the code needs, by name ("pandas", "scikit-learn"). The heavy tier runs the code in
	// an image that has them all; with runtime auto, asking for packages means heavy. Packages no
	// image has are installed on demand with pip in the sandbox, from the daemon's package index
	// (heavy.package_index, default PyPI) through the egress gateway under EgressProfile (which
	// must allow the index: policy_violation otherwise), and kept in the daemon's wheel cache; the
	// result's routing reasons say where they came from. One the index lacks is invalid_request
	// naming it.
	Packages []string `json:"packages,omitempty"`
	// Image names a heavy image. Default: the first image that has Packages (the daemon's default
	// image first).
	Image string `json:"image,omitempty"`
	// Network gives the sandbox a way out through the daemon's egress gateway, under
	// EgressProfile (default "default"): HTTP and HTTPS through the gateway's proxy only, each
	// request checked by the profile, the SSRF guard and DLP. Heavy only; with runtime auto it
	// means heavy. In a session run it must match the session.
	Network       bool   `json:"network,omitempty"`
	EgressProfile string `json:"egress_profile,omitempty"`
}

// InputFile is a file given to a run.
type InputFile struct {
	// Path is absolute inside the sandbox or relative to /home/user; ".." is refused.
	Path string `json:"path"`
	// Content is the file's bytes; base64 on the wire.
	Content []byte `json:"content"`
}

// Deterministic fixes what a run would otherwise read from the host.
type Deterministic struct {
	// Time is what the wall clock reads when the run starts (RFC 3339 on the wire). The clock
	// then advances by a fixed step per read. Default 1970-01-01T00:00:00Z.
	Time time.Time `json:"time,omitzero"`
	// Seed seeds the random source the code reads (os.urandom, random).
	Seed int64 `json:"seed"`
}
