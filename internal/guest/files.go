//go:build linux

package guest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// writeFile writes content to path, creating parents; new files and directories belong to the
// Python user, so the code can change what it was given.
func (a *agent) writeFile(path string, content []byte, mode uint32) error {
	p, err := cleanAbs(path)
	if err != nil {
		return err
	}
	if err := a.mkdirAll(filepath.Dir(p)); err != nil {
		return fileErr(err)
	}
	perm := os.FileMode(0o644)
	if mode != 0 {
		perm = os.FileMode(mode) & 0o777
	}
	tmp := p + ".agentbox-tmp"
	if err := os.WriteFile(tmp, content, perm); err != nil {
		return fileErr(err)
	}
	_ = os.Chown(tmp, a.cfg.UID, a.cfg.GID)
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fileErr(err)
	}
	return nil
}

func (a *agent) mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return &proto.Error{Kind: sandbox.KindConflict, Message: dir + " is not a directory"}
		}
		return nil
	}
	if err := a.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chown(dir, a.cfg.UID, a.cfg.GID)
}

// maxReadFile bounds one file read through the protocol.
const maxReadFile = 512 << 20

func (a *agent) readFile(path string) ([]byte, error) {
	p, err := cleanAbs(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fileErr(err)
	}
	if !st.Mode().IsRegular() {
		return nil, &proto.Error{Kind: sandbox.KindInvalidRequest, Message: path + " is not a regular file"}
	}
	if st.Size() > maxReadFile {
		return nil, &proto.Error{Kind: sandbox.KindOutputLimit, Message: path + " is larger than " + strconv.Itoa(maxReadFile>>20) + " MiB"}
	}
	b, err := os.ReadFile(p)
	return b, fileErr(err)
}

// maxList bounds the entries of one listing.
const maxList = 10000

func (a *agent) listFiles(path string) ([]proto.FileInfo, error) {
	p, err := cleanAbs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(p); err != nil {
		return nil, fileErr(err)
	}
	var out []proto.FileInfo
	err = filepath.Walk(p, func(q string, info os.FileInfo, err error) error {
		if err != nil || q == p {
			return nil
		}
		if len(out) >= maxList {
			return filepath.SkipAll
		}
		if strings.HasSuffix(q, ".agentbox-tmp") {
			return nil
		}
		out = append(out, proto.FileInfo{Path: q, Size: info.Size(), Dir: info.IsDir(), ModTime: info.ModTime().UTC().Truncate(time.Millisecond)})
		return nil
	})
	return out, fileErr(err)
}

func (a *agent) deleteFile(path string) error {
	p, err := cleanAbs(path)
	if err != nil {
		return err
	}
	if p == a.cfg.WorkDir {
		return &proto.Error{Kind: sandbox.KindInvalidRequest, Message: "the work directory itself cannot be deleted"}
	}
	if _, err := os.Lstat(p); err != nil {
		return fileErr(err)
	}
	return fileErr(os.RemoveAll(p))
}

// fileErr gives file errors their kinds.
func fileErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return &proto.Error{Kind: sandbox.KindNotFound, Message: err.Error()}
	case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrInvalid):
		return &proto.Error{Kind: sandbox.KindConflict, Message: err.Error()}
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &proto.Error{Kind: sandbox.KindInternal, Message: err.Error()}
}
