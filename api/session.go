package api

import "time"

// CreateSessionRequest is the body of POST /v1/sessions. A session keeps one interpreter alive:
// variables, imports and files of a run are visible to the next. Every field is optional.
type CreateSessionRequest struct {
	// Runtime is "auto" (default, which is nano for sessions), "nano" or "heavy".
	Runtime string `json:"runtime,omitempty"`
	// Timeout is the default budget of each run in seconds; a run may ask for its own.
	Timeout float64 `json:"timeout,omitempty"`
	// MemoryMB, StdoutLimit, StderrLimit and FilesLimit hold for the session's whole life.
	MemoryMB    int64 `json:"memory_mb,omitempty"`
	StdoutLimit int64 `json:"stdout_limit,omitempty"`
	StderrLimit int64 `json:"stderr_limit,omitempty"`
	FilesLimit  int64 `json:"files_limit,omitempty"`
	// Env is the environment of every run in the session.
	Env map[string]string `json:"env,omitempty"`
	// Packages and Image choose a heavy session's image, as in RunRequest; they imply heavy.
	Packages []string `json:"packages,omitempty"`
	Image    string   `json:"image,omitempty"`
	// Network and EgressProfile are as in RunRequest, for the session's whole life.
	Network       bool   `json:"network,omitempty"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// Volumes mounts the tenant's volumes (POST /v1/volumes) by name at absolute paths for the
	// session's life: {"data": "/mnt/data"}, or "/mnt/data:ro" read-only. Heavy sessions only.
	// One session mounts a volume read-write at a time, or any number read-only.
	Volumes map[string]string `json:"volumes,omitempty"`
}

// Session describes an open session.
type Session struct {
	// ID names the session in the URLs /v1/sessions/{id}.
	ID      string `json:"id"`
	Runtime string `json:"runtime"`
	// Limits are the session's limits with the server's defaults filled in.
	Limits    Limits    `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
	LastUsed  time.Time `json:"last_used"`
	// Runs counts the runs so far.
	Runs int `json:"runs"`
	// IdleTimeout is how many seconds the session may stay unused before the daemon closes it.
	IdleTimeout float64 `json:"idle_timeout"`
	// Network says the session reaches out through the egress gateway, under EgressProfile.
	Network       bool   `json:"network"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// State is "live" (the session holds a sandbox) or "paused" (its state is on disk; the next
	// run or POST /v1/sessions/{id}/resume brings it back).
	State string `json:"state"`
	// Head is the step whose state the session holds; empty before its first run.
	Head string `json:"head,omitempty"`
	// Steps counts the session's steps (GET /v1/sessions/{id}/steps).
	Steps int `json:"steps"`
	// ForkedFrom is "session/step" for a session forked from another's step.
	ForkedFrom string `json:"forked_from,omitempty"`
	// KeptUntil is set for a session closed with keep=true: it is paused, and its state and
	// steps are kept until then, to be resumed (a run, POST .../resume) or forked from a step.
	KeptUntil *time.Time `json:"kept_until,omitempty"`
}

// SetIntentRequest is the body of PUT /v1/sessions/{id}/intent.
type SetIntentRequest struct {
	// Name is one of the intents the session's egress profile defines.
	Name string `json:"name"`
	// TTL is how many seconds the intent lasts; 0 or missing means the intent's maximum.
	TTL float64 `json:"ttl,omitempty"`
}

// Intent is a session's current intent (GET and PUT /v1/sessions/{id}/intent).
type Intent struct {
	// Name is the intent, or "" when the session has none.
	Name string `json:"name"`
	// ExpiresAt is when the intent ends, or null when there is none.
	ExpiresAt *time.Time `json:"expires_at"`
}

// Limits are effective limits, in the units of RunRequest.
type Limits struct {
	Timeout     float64 `json:"timeout"`
	MemoryMB    int64   `json:"memory_mb"`
	StdoutLimit int64   `json:"stdout_limit"`
	StderrLimit int64   `json:"stderr_limit"`
	FilesLimit  int64   `json:"files_limit"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	// Sessions are the open sessions, oldest first. Never null.
	Sessions []Session `json:"sessions"`
}

// FileInfo describes a file or directory of a session (GET /v1/sessions/{id}/files).
type FileInfo struct {
	// Path is absolute inside the sandbox.
	Path string `json:"path"`
	// Size is the file's length in bytes (0 for a directory).
	Size    int64     `json:"size"`
	Dir     bool      `json:"dir"`
	ModTime time.Time `json:"mod_time"`
}

// FileList is the body of GET /v1/sessions/{id}/files.
type FileList struct {
	// Files are every file and directory under the path asked for, recursively, sorted by path.
	// Never null.
	Files []FileInfo `json:"files"`
}

// Image is a heavy image the daemon can run (GET /v1/images).
type Image struct {
	Name string `json:"name"`
	// Hash identifies the build (a hash of the recipe).
	Hash string `json:"hash"`
	// Default: warm sandboxes run this image, and requests without packages get it.
	Default bool   `json:"default"`
	Python  string `json:"python"`
	// Packages maps the image's Python distributions to their versions. Never null.
	Packages  map[string]string `json:"packages"`
	SizeBytes int64             `json:"size_bytes"`
	Built     time.Time         `json:"built"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	// Images are the built images, the default first. Never null; empty when the daemon does
	// not run the heavy tier.
	Images []Image `json:"images"`
}

// ReloadResult is the body of POST /v1/egress/reload.
type ReloadResult struct {
	// Profiles are the egress profiles now in force.
	Profiles []string `json:"profiles"`
}
