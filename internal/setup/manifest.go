package setup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/digest"
	"os"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/pybuild"
)

// manifest records what is installed in the nano directory, so setup can tell "done" from
// "half done" and the wrong build.
type manifest struct {
	Source   string            `json:"source"`
	Describe string            `json:"describe"`
	SHA256   map[string]string `json:"sha256"` // file name → hash
	// Recipe is the SHA-256 of the build script a source build came from: a binary with another
	// script (new patches, say) builds anew instead of keeping a build that lacks them.
	Recipe string `json:"recipe,omitempty"`
}

// stale says why an installed build is not what this binary would install, or "".
func (m manifest) stale() string {
	if m.Source == "source" && m.Recipe != recipeHash() {
		return "its build script changed"
	}
	return ""
}

// recipeHash is the SHA-256 of the embedded build script.
func recipeHash() string {
	sum := sha256.Sum256(pybuild.Script)
	return hex.EncodeToString(sum[:])
}

const manifestFile = "manifest.json"

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

func (m manifest) write(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, manifestFile), b, 0o644)
}

// verify checks that every recorded file is there with its hash.
func (m manifest) verify(dir string) error {
	if len(m.SHA256) == 0 || m.SHA256[nano.WasmFile] == "" {
		return fmt.Errorf("manifest lists no module")
	}
	for name, want := range m.SHA256 {
		got, err := digest.File(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: sha256 %s, manifest says %s", name, got, want)
		}
	}
	return nil
}
