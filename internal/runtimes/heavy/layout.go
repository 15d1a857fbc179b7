package heavy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
)

// Layout is where the heavy tier keeps its files under the data directory:
//
//	DATA_DIR/heavy/bin/runsc-VERSION   runsc built from source at the version pinned in go.mod
//	DATA_DIR/heavy/bin/agentbox-guest  the guest agent (static), copied into images
//	DATA_DIR/heavy/images/             images (see package rootfs)
//	DATA_DIR/heavy/run/ID/             one sandbox's OCI bundle (config.json); removed when it ends
//	DATA_DIR/heavy/state/              runsc's --root: its record of running containers
//	DATA_DIR/heavy/templates/KEY/      a checkpoint of a preloaded sandbox the warm pool restores
//	                                   (~50 MB; KEY hashes what it depends on, see template.go)
//
// run/, state/ and templates/ belong to one daemon at a time (a lock file in run/); whatever a
// daemon that died left there is cleaned when the next one starts.
type Layout struct {
	Dir string // DATA_DIR/heavy
}

// LayoutFor returns the heavy layout of a data directory.
func LayoutFor(dataDir string) Layout { return Layout{Dir: filepath.Join(dataDir, "heavy")} }

func (l Layout) BinDir() string { return filepath.Join(l.Dir, "bin") }

// Runsc is the runsc binary of a version.
func (l Layout) Runsc(version string) string {
	return filepath.Join(l.BinDir(), "runsc-"+version)
}

// RunscWait is the waiter that stands in for an attached `runsc restore` (cmd/agentbox-runsc-wait),
// which setup builds beside runsc in the source tree.
func (l Layout) RunscWait() string { return filepath.Join(l.BinDir(), "agentbox-runsc-wait") }

// BuildRunscWait builds cmd/agentbox-runsc-wait of the source tree at root into dst, static.
func BuildRunscWait(ctx context.Context, root, dst string) error {
	return buildStatic(ctx, root, "./cmd/agentbox-runsc-wait", dst)
}

// Guest is the guest agent setup builds.
func (l Layout) Guest() string { return filepath.Join(l.BinDir(), "agentbox-guest") }

func (l Layout) Images() rootfs.Store { return rootfs.Store{Dir: filepath.Join(l.Dir, "images")} }
func (l Layout) RunDir() string       { return filepath.Join(l.Dir, "run") }
func (l Layout) StateDir() string     { return filepath.Join(l.Dir, "state") }

// FindGuest returns the guest agent binary to put into images: explicit if given, else
// agentbox-guest next to the running executable, else the one setup built into the layout, else
// agentbox-guest on PATH.
func (l Layout) FindGuest(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		tried = append(tried, filepath.Join(filepath.Dir(exe), "agentbox-guest"))
	}
	tried = append(tried, l.Guest())
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("agentbox-guest"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no guest agent binary (looked at %s and PATH): run `agentbox setup` in the source tree, or build it: CGO_ENABLED=0 go build -o %s ./cmd/agentbox-guest",
		strings.Join(tried, ", "), l.Guest())
}

// ModulePath is this module's path, to recognise its source tree.
const ModulePath = "github.com/agentbox-dev/agentbox"

// SourceRoot returns the root of this module's source tree if dir is inside one.
func SourceRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(first) == "module "+ModulePath {
				return d, nil
			}
			return "", fmt.Errorf("%s is in module %q, not %s", dir, strings.TrimPrefix(strings.TrimSpace(first), "module "), ModulePath)
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the agentbox source tree")
		}
	}
}

// BuildGuest builds cmd/agentbox-guest of the source tree at root, static, into dst (atomically).
func BuildGuest(ctx context.Context, root, dst string) error {
	return buildStatic(ctx, root, "./cmd/agentbox-guest", dst)
}

// buildStatic builds the main package pkg of the source tree at root into dst (atomically),
// without cgo.
func buildStatic(ctx context.Context, root, pkg, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build %s: %v: %s", pkg, err, out)
	}
	return os.Rename(tmp, dst)
}
