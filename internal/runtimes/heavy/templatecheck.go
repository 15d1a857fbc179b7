package heavy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A template's files are recorded when it is made (meta.Files) so that a template whose restores
// keep failing can be told apart from a machine that is too busy: a file gone or changed, or a
// runsc or image that changed under it, is a broken template, which no retry can mend.

// fileSum is what a template records of one file of its checkpoint image.
type fileSum struct {
	Size int64 `json:"size"`
	// SHA256 is set for the small files (the kernel state, the page metadata), not for the page
	// file itself (~40 MiB), whose size is checked.
	SHA256 string `json:"sha256,omitempty"`
}

// hashLimit is the largest file of a checkpoint whose hash is recorded: checkpoint.img is
// ~0.5 MiB, pages.img ~40 MiB.
const hashLimit = 4 << 20

// sumFiles records the files of a checkpoint image.
func sumFiles(dir string) (map[string]fileSum, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sums := map[string]fileSum{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		s, err := sumFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sums[e.Name()] = s
	}
	return sums, nil
}

func sumFile(path string) (fileSum, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileSum{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fileSum{}, err
	}
	s := fileSum{Size: st.Size()}
	if s.Size <= hashLimit {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return fileSum{}, err
		}
		s.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return s, nil
}

// refusals are what runsc says when it refuses a checkpoint as such (unreadable, or taken with
// other settings), as opposed to a restore that was slow or killed.
var refusals = []string{"statefile.NewReader", "spec validation", "cannot be restored", "incompatible"}

// templateBroken says why t cannot be restored any more, or "" if nothing shows it is broken
// (its restores then failed for another reason, such as load). err is the last failure.
func (rt *Runtime) templateBroken(t *template, err error) string {
	for name, want := range t.Files {
		got, serr := sumFile(filepath.Join(t.image(), name))
		switch {
		case os.IsNotExist(serr):
			return fmt.Sprintf("its file %s is gone", name)
		case serr != nil:
			return fmt.Sprintf("its file %s cannot be read: %v", name, serr)
		case got.Size != want.Size || (want.SHA256 != "" && got.SHA256 != want.SHA256):
			return fmt.Sprintf("its file %s changed since it was made", name)
		}
	}
	if len(t.Files) == 0 { // made by an older daemon: only whether the image is there is known
		if _, serr := os.Stat(filepath.Join(t.image(), "checkpoint.img")); serr != nil {
			return "its checkpoint image is gone"
		}
	}
	if key, kerr := rt.templateKey(); kerr != nil || key != t.key {
		return "runsc, the image or the sandbox's settings changed since it was made (incompatible)"
	}
	for _, r := range refusals {
		if strings.Contains(err.Error(), r) {
			return "runsc refused it: " + err.Error()
		}
	}
	return ""
}
