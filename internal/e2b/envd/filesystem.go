package envd

import (
	"context"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// filesystem.Filesystem onto the session's files. Stat, ListDir and Remove go through the
// Manager's file operations (the guest's file channel: the work directory and /tmp, as the
// sandbox's user, never following a link out); MakeDir and Move, which that channel lacks, run
// mkdir and mv as commands in the session (argv, no shell), so they are recorded in the audit log
// as commands. The watch calls poll the directory's listing (watch.go).

func (h *Handler) serveFilesystem(w http.ResponseWriter, r *http.Request, t Target, method string) {
	if method == "WatchDir" {
		h.watchDir(w, r, t)
		return
	}
	var out any
	err := checkUser(userOf(r))
	if err == nil {
		switch method {
		case "Stat":
			var req pathRequest
			if err = readUnary(r, &req); err == nil {
				var e entryInfo
				e, err = stat(r.Context(), t, resolve(req.Path))
				out = entryResponse{Entry: &e}
			}
		case "ListDir":
			var req listDirRequest
			if err = readUnary(r, &req); err == nil {
				out, err = listDir(r.Context(), t, resolve(req.Path), req.Depth)
			}
		case "MakeDir":
			var req pathRequest
			if err = readUnary(r, &req); err == nil {
				out, err = makeDir(r.Context(), t, resolve(req.Path))
			}
		case "Move":
			var req moveRequest
			if err = readUnary(r, &req); err == nil {
				out, err = move(r.Context(), t, resolve(req.Source), resolve(req.Destination))
			}
		case "Remove":
			var req pathRequest
			if err = readUnary(r, &req); err == nil {
				err = t.Engine.RemoveFile(r.Context(), t.Session, resolve(req.Path))
				out = struct{}{}
			}
		case "CreateWatcher":
			var req watchRequest
			if err = readUnary(r, &req); err == nil {
				out, err = h.watchers.create(r.Context(), t, req)
			}
		case "GetWatcherEvents":
			var req watcherRequest
			if err = readUnary(r, &req); err == nil {
				out, err = h.watchers.events(r.Context(), t, req.WatcherID)
			}
		case "RemoveWatcher":
			var req watcherRequest
			if err = readUnary(r, &req); err == nil {
				err = h.watchers.remove(t, req.WatcherID)
				out = struct{}{}
			}
		default:
			err = notImplemented("filesystem.Filesystem/"+method, "no such call in envd's filesystem service")
		}
	}
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, out)
}

// roots are the directories a session's file operations reach; they always exist.
var roots = []string{homeDir, "/tmp"}

// entryOf is envd's EntryInfo of a file of the session.
func entryOf(f sandbox.FileInfo) entryInfo {
	m := fs.FileMode(f.Mode)
	typ := fileTypeFile
	switch {
	case f.Dir || m.IsDir():
		typ = fileTypeDirectory
	case m&fs.ModeSymlink != 0:
		typ = fileTypeSymlink
	}
	perm := uint32(m.Perm())
	if perm == 0 {
		perm = 0o644
		if typ == fileTypeDirectory {
			perm = 0o755
		}
	}
	e := entryInfo{Name: path.Base(f.Path), Type: typ, Path: f.Path, Size: int64s(f.Size), Mode: perm,
		Permissions: permissions(perm, typ), Owner: "user", Group: "user"}
	if !f.ModTime.IsZero() {
		e.ModifiedTime = f.ModTime.UTC().Format(time.RFC3339Nano)
	}
	return e
}

// stat describes p, from its parent's listing.
func stat(ctx context.Context, t Target, p string) (entryInfo, error) {
	for _, root := range roots {
		if p == root {
			return entryOf(sandbox.FileInfo{Path: p, Dir: true}), nil
		}
	}
	parent := path.Dir(p)
	l, err := t.Engine.ListFiles(ctx, t.Session, parent)
	if err != nil {
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			return entryInfo{}, errorf(codeNotFound, "%s: no such file or directory", p)
		}
		return entryInfo{}, err
	}
	for _, f := range l {
		if f.Path == p {
			return entryOf(f), nil
		}
	}
	return entryInfo{}, errorf(codeNotFound, "%s: no such file or directory", p)
}

// listDir lists p down to depth levels (at least one).
func listDir(ctx context.Context, t Target, p string, depth uint32) (listDirResponse, error) {
	depth = max(depth, 1)
	l, err := t.Engine.ListFiles(ctx, t.Session, p)
	if err != nil {
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			return listDirResponse{}, errorf(codeNotFound, "%s: no such file or directory", p)
		}
		return listDirResponse{}, err
	}
	out := listDirResponse{Entries: []entryInfo{}}
	if len(l) == 0 {
		// An empty directory, or not a directory at all.
		e, err := stat(ctx, t, p)
		if err != nil {
			return listDirResponse{}, err
		}
		if e.Type != fileTypeDirectory {
			return listDirResponse{}, errorf(codeInvalidArgument, "%s is not a directory", p)
		}
		return out, nil
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for _, f := range l {
		rel, ok := strings.CutPrefix(f.Path, prefix)
		if !ok || uint32(strings.Count(rel, "/")) >= depth {
			continue
		}
		out.Entries = append(out.Entries, entryOf(f))
	}
	return out, nil
}

// run runs argv in the session and fails with its stderr when it does not exit 0.
func run(ctx context.Context, t Target, argv ...string) error {
	c, err := t.Engine.RunCommand(ctx, t.Session, sandbox.Command{Argv: argv, Timeout: time.Minute}, nil)
	if err != nil {
		return err
	}
	if c.Status != sandbox.CommandExited || c.ExitCode != 0 {
		msg := strings.TrimSpace(c.Stderr)
		if msg == "" {
			msg = c.Status + " " + c.Error
		}
		code := codeInvalidArgument
		switch {
		case strings.Contains(msg, "No such file"):
			code = codeNotFound
		case strings.Contains(msg, "Permission denied"):
			code = codePermissionDenied
		}
		return errorf(code, "%s", msg)
	}
	return nil
}

func makeDir(ctx context.Context, t Target, p string) (entryResponse, error) {
	if _, err := stat(ctx, t, p); err == nil {
		return entryResponse{}, errorf(codeAlreadyExists, "%s already exists", p)
	}
	if err := run(ctx, t, "mkdir", "-p", "--", p); err != nil {
		return entryResponse{}, err
	}
	e, err := stat(ctx, t, p)
	return entryResponse{Entry: &e}, err
}

func move(ctx context.Context, t Target, from, to string) (entryResponse, error) {
	// As envd: the destination's parents are made, then the source renamed onto it.
	if err := run(ctx, t, "/bin/sh", "-c", `mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$1" "$2"`, "sh", from, to); err != nil {
		return entryResponse{}, err
	}
	e, err := stat(ctx, t, to)
	return entryResponse{Entry: &e}, err
}
