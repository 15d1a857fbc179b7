package heavy

import (
	"context"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Files reads and changes the files of a session's sandbox, between or during runs. Paths are
// taken as sandbox.CleanPath takes them: relative ones land in sandbox.WorkDir.
type Files struct{ b *box }

// SessionFiles returns the file operations of a heavy session, or false for another session.
func SessionFiles(s sandbox.Session) (*Files, bool) {
	hs, ok := s.(*session)
	if !ok {
		return nil, false
	}
	return hs.Files(), true
}

func (f *Files) Write(ctx context.Context, path string, content []byte) error {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return err
	}
	_, err = f.b.request(ctx, &proto.Frame{Op: proto.OpWriteFile, Path: p, Content: content})
	return err
}

func (f *Files) Read(ctx context.Context, path string) ([]byte, error) {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return nil, err
	}
	ans, err := f.b.request(ctx, &proto.Frame{Op: proto.OpReadFile, Path: p})
	if err != nil {
		return nil, err
	}
	return ans.Content, nil
}

// List returns everything under path, recursively.
func (f *Files) List(ctx context.Context, path string) ([]proto.FileInfo, error) {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return nil, err
	}
	ans, err := f.b.request(ctx, &proto.Frame{Op: proto.OpListFiles, Path: p})
	if err != nil {
		return nil, err
	}
	return ans.Entries, nil
}

// Delete removes path (a directory with everything under it).
func (f *Files) Delete(ctx context.Context, path string) error {
	p, err := sandbox.CleanPath(path)
	if err != nil {
		return err
	}
	_, err = f.b.request(ctx, &proto.Frame{Op: proto.OpDeleteFile, Path: p})
	return err
}
