package sandbox

import (
	"encoding/json"
	"time"
)

// Tier names a runtime. Each runtime names itself (Capabilities.Tier); the core knows no tier by
// name but auto, which lets the router choose.
type Tier string

// TierAuto asks the Manager to choose the tier by the code and the request.
const TierAuto Tier = "auto"

// Limits bound one run. A zero field means "the server's default"; the Manager fills defaults and
// rejects values above the server's maximum before a runtime sees the request.
type Limits struct {
	// Timeout is the wall-clock budget of the run, from when a sandbox takes it to its result:
	// starting an interpreter, when none is ready, counts against it. Waiting in the queue does not.
	Timeout time.Duration `json:"timeout"`
	// MemoryBytes caps the guest's memory (nano: the Wasm linear memory).
	MemoryBytes int64 `json:"memory_bytes"`
	// StdoutBytes and StderrBytes cap what is kept of each stream; the rest is dropped and the
	// result is flagged as truncated.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// FilesBytes caps the private file system: input files plus everything the code writes.
	FilesBytes int64 `json:"files_bytes"`
}

// File is a file given to or returned from a run. Path is absolute inside the sandbox, or relative
// to WorkDir.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
}

// WorkDir is the directory a run starts in and where relative file paths land, in every tier.
const WorkDir = "/home/user"

// Determinism fixes what a run would otherwise read from the host, so the same code and inputs give
// the same outputs (needed for exact replay).
type Determinism struct {
	// Time is what the wall clock reads at the start of the run. The clock then advances by a
	// fixed step per read, not with real time, so two runs read the same sequence.
	Time time.Time `json:"time"`
	// Seed seeds the random source the guest reads (os.urandom, random's seed).
	Seed int64 `json:"seed"`
}

// RunRequest is one piece of code to run.
type RunRequest struct {
	Code   string            `json:"code"`
	Tier   Tier              `json:"runtime"`
	Limits Limits            `json:"limits"`
	Files  []File            `json:"files,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Deterministic, when set, fixes clocks and random for this run. Nil means real ones.
	Deterministic *Determinism `json:"deterministic,omitempty"`
	// Packages the code needs (Python distribution names such as "pandas"). The heavy tier picks
	// an image that has them all; a package no image has is an invalid request.
	Packages []string `json:"packages,omitempty"`
	// Image asks the heavy tier for an image by name. Empty: the first image with Packages.
	Image string `json:"image,omitempty"`
	// Network gives the sandbox a way out through the egress gateway, under EgressProfile
	// (default "default"). Only the heavy tier has it; without it a sandbox has no network.
	Network       bool   `json:"network,omitempty"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// ID names the run in egress records and counters; the Manager sets it.
	ID string `json:"id,omitempty"`
	// Output, when set, receives the run's stdout and stderr as the code writes them (stream.go).
	// The result still carries them whole.
	Output OutputSink `json:"-"`

	// Context runs the code in one of the session's code contexts (contexts.go): its own
	// variables and working directory, the session's files, processes and packages. Empty: the
	// session's main context. Session runs only, on a tier whose Capabilities have Contexts.
	Context string `json:"context,omitempty"`
	// ContextDir is the working directory Context starts in when this run makes it (its first
	// run, or one with ContextReset), made if missing; default WorkDir. Later runs find it where
	// the context's code left it.
	ContextDir string `json:"context_dir,omitempty"`
	// ContextReset starts Context afresh before the code runs: no variables, in ContextDir (a
	// context's restart). ContextEnd forgets Context after the code runs (its removal). With
	// either, the code may be empty.
	ContextReset bool `json:"context_reset,omitempty"`
	ContextEnd   bool `json:"context_end,omitempty"`
}

// PyError is the exception the user's code raised. It is part of a result, not an API error.
type PyError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// Timing says where a run's time went. Pool says whether a warm instance served it ("warm") or
// one had to be started for it ("cold").
type Timing struct {
	Queue   time.Duration `json:"queue"`
	Start   time.Duration `json:"start"`
	Execute time.Duration `json:"execute"`
	Total   time.Duration `json:"total"`
	Pool    string        `json:"pool"`
}

// Result is what a run produced.
type Result struct {
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
	ExitCode        int      `json:"exit_code"`
	Error           *PyError `json:"error,omitempty"`
	Runtime         Tier     `json:"runtime"`
	// Routing says why the run went to Runtime.
	Routing *Decision `json:"routing,omitempty"`
	// Files are the files the code created or changed in its private file system.
	Files []File `json:"files,omitempty"`
	// Artifacts are what the run produced besides its streams and files, such as the figures it
	// drew. Their content is kept by the daemon and fetched by ID.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Outputs are rich values the run displayed: the value of its last expression, in each
	// representation the value offers (a pandas DataFrame: text, HTML and JSON).
	Outputs []Output `json:"outputs,omitempty"`
	Timing  Timing   `json:"timing"`
	// Step is the session step this run made (steps.go); empty for one-shot runs.
	Step string `json:"step,omitempty"`
	// Notice tells of something that happened to the session since its last answer (it moved to
	// another node); given once, with the first run after it (adopt.go).
	Notice *Notice `json:"notice,omitempty"`
}

// Artifact is a file-like product of a run other than its files: a figure drawn with matplotlib
// comes back as a PNG artifact. A runtime fills Content; the Manager stores it, sets ID and clears
// Content, so results stay small and artifacts are fetched on their own.
type Artifact struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	MIME   string `json:"mime"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Content is the artifact's bytes while the result travels from the runtime to the Manager.
	Content []byte `json:"-"`
	// Chart is what a figure shows, for a matplotlib figure of the heavy tier: its type (line,
	// scatter, bar, pie, box_and_whisker, superchart for several axes, unknown), title, and per
	// type the data read from its axes (labels, units, ticks, scales; points, bars, wedges,
	// boxes), bounded (a chart that was cut has "truncated": true). The shape is the one E2B's
	// code interpreter returns as a result's "chart". JSON; nil for other artifacts.
	Chart json.RawMessage `json:"chart,omitempty"`
	// Owner is the tenant whose run made it (Caller.Tenant); the store keeps it, and another
	// tenant's caller gets not_found for the artifact.
	Owner string `json:"owner,omitempty"`
}

// Output is one value a run displayed, in every representation it offers. Text is always set.
type Output struct {
	Text string `json:"text"`
	HTML string `json:"html,omitempty"`
	// JSON is a JSON document (a DataFrame's to_json(orient="table")), kept verbatim.
	JSON json.RawMessage `json:"json,omitempty"`
}

// FileInfo describes one file or directory of a session's file system.
type FileInfo struct {
	// Path is absolute inside the sandbox.
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Dir     bool      `json:"dir"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// SessionOptions describe a stateful session: one interpreter kept alive across runs.
type SessionOptions struct {
	Tier   Tier              `json:"runtime"`
	Limits Limits            `json:"limits"`
	Env    map[string]string `json:"env,omitempty"`
	// Packages and Image choose the heavy tier's image, as in RunRequest.
	Packages []string `json:"packages,omitempty"`
	Image    string   `json:"image,omitempty"`
	// Network and EgressProfile are as in RunRequest, for the session's whole life.
	Network       bool   `json:"network,omitempty"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// Volumes mounts the tenant's volumes by name at absolute paths ("/mnt/data", or
	// "/mnt/data:ro" read-only) for the session's life (volumes.go).
	Volumes map[string]string `json:"volumes,omitempty"`
	// Mounts are Volumes as the tier binds them, with their host directories; the Manager sets
	// them after taking the volumes' leases.
	Mounts []Mount `json:"-"`
	// ID is the session's ID; the Manager sets it.
	ID string `json:"id,omitempty"`
}
