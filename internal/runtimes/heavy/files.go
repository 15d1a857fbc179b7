package heavy

import (
	"context"
	"io/fs"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A heavy session's files can be read and changed between or during runs: the guest agent serves
// these requests beside the running cell. Paths are taken as sandbox.CleanPath takes them:
// relative ones land in sandbox.WorkDir. The agent acts as the sandbox's user, only under the
// session's directories (sandbox.WorkDir and /tmp; elsewhere is invalid_request), and follows no
// symbolic link out of them (invalid_request): see package guest's files.go. A listing shows a
// link as a link (fs.ModeSymlink in Mode), never what it points to.

// Interface guards.
var _ sandbox.SessionFiles = (*session)(nil)

func (s *session) WriteFile(ctx context.Context, path string, content []byte) error {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return err
	}
	b, err := s.use(ctx)
	if err != nil {
		return err
	}
	_, err = b.request(ctx, &proto.Frame{Op: proto.OpWriteFile, Path: p, Content: content})
	return err
}

func (s *session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return nil, err
	}
	b, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	ans, err := b.request(ctx, &proto.Frame{Op: proto.OpReadFile, Path: p})
	if err != nil {
		return nil, err
	}
	return ans.Content, nil
}

// ListFiles returns everything under path, recursively.
func (s *session) ListFiles(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return nil, err
	}
	b, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	ans, err := b.request(ctx, &proto.Frame{Op: proto.OpListFiles, Path: p})
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.FileInfo, 0, len(ans.Entries))
	for _, e := range ans.Entries {
		// The guest is not trusted to stay inside the path it was asked for.
		if q, err := sandbox.CleanPath(e.Path); err != nil || !within(q, p) {
			continue
		}
		mode := uint32(0o644)
		switch {
		case e.Dir:
			mode = uint32(fs.ModeDir | 0o755)
		case e.Link:
			mode = uint32(fs.ModeSymlink | 0o777)
		}
		out = append(out, sandbox.FileInfo{Path: e.Path, Size: e.Size, Dir: e.Dir, Mode: mode, ModTime: e.ModTime})
	}
	return out, nil
}

// RemoveFile removes path (a directory with everything under it).
func (s *session) RemoveFile(ctx context.Context, path string) error {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return err
	}
	b, err := s.use(ctx)
	if err != nil {
		return err
	}
	_, err = b.request(ctx, &proto.Frame{Op: proto.OpDeleteFile, Path: p})
	return err
}

// within reports whether p is dir or under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}
