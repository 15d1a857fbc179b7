package sandbox

import (
	"context"
	"io"
	"time"
)

// Runtime is what a tier must do. Implementations are safe for concurrent use.
//
// Lifecycle: the daemon builds each runtime once, calls Run and NewSession from many goroutines,
// and calls Close once at shutdown; Close ends every session the runtime still holds.
type Runtime interface {
	// Capabilities says what the tier offers; the Manager routes by it. It does not change while
	// the runtime runs.
	Capabilities() Capabilities
	// Run runs req in a fresh sandbox: nothing of an earlier run is visible to it. Limits in req
	// are already defaulted and checked by the Manager. A limit that ends the run is returned as an
	// *Error of that kind whose Result holds what the run produced before it.
	Run(ctx context.Context, req *RunRequest) (*Result, error)
	// NewSession starts a sandbox whose interpreter state survives between runs.
	NewSession(ctx context.Context, opts SessionOptions) (Session, error)
	// Close stops the runtime and everything it started.
	Close() error
}

// Session is one stateful sandbox. Runs in a session are serialised by the Manager.
type Session interface {
	// Run runs req in the session's interpreter; variables, imports and files of earlier runs
	// are visible. Files in req are written before the code starts.
	Run(ctx context.Context, req *RunRequest) (*Result, error)
	// Close ends the session and frees what it holds. It is safe to call more than once.
	Close() error
}

// Health is an optional ability: a runtime that can report its state implements it.
type Health interface {
	// Health returns a short human-readable state and whether the runtime can take runs.
	Health(ctx context.Context) (state string, ok bool)
}

// SessionFiles is an optional ability of a Session: reading and changing its file system between
// runs. Paths are absolute or relative to WorkDir, already checked by CleanPath.
type SessionFiles interface {
	WriteFile(ctx context.Context, path string, content []byte) error
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// ListFiles lists everything under path, recursively.
	ListFiles(ctx context.Context, path string) ([]FileInfo, error)
	// RemoveFile removes path, a directory with everything under it.
	RemoveFile(ctx context.Context, path string) error
}

// ArtifactStore keeps the content of artifacts for download, so results carry only their
// descriptions. The Manager owns this interface; package artifacts implements it on disk.
type ArtifactStore interface {
	// Put stores a.Content, sets a.ID, Size and SHA256, and clears a.Content.
	Put(a *Artifact) error
	// Open returns a stored artifact's description and content; an unknown or expired ID is
	// ErrNotFound.
	Open(id string) (Artifact, io.ReadSeekCloser, error)
}

// OwnerUsage is an optional ability of an ArtifactStore: how many bytes one tenant's artifacts
// hold, for its stored-bytes quota.
type OwnerUsage interface {
	OwnerBytes(owner string) int64
}

// Catalog is an optional ability of a Runtime that runs images: it lists them, so a client can
// see what packages it may ask for.
type Catalog interface {
	Images() []ImageInfo
}

// ImageInfo describes an image a runtime can run.
type ImageInfo struct {
	Name    string `json:"name"`
	Hash    string `json:"hash"`
	Default bool   `json:"default"`
	Python  string `json:"python"`
	// Packages maps Python distribution names to versions.
	Packages map[string]string `json:"packages"`
	// Modules are the top-level modules the image's Python can import: its standard library and
	// its packages' import names (PIL for Pillow). The router and the ModuleNotFoundError
	// fallback look imports up here.
	Modules   []string  `json:"modules,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	Built     time.Time `json:"built"`
}
