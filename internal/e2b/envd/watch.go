package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Watching a directory. The guest has no inotify channel, so a watch compares listings of the
// directory taken through the file channel: a path that appears is a create, one whose size or
// modification time changed a write, one that went a remove (a rename is a remove and a
// create). WatchDir polls every pollInterval while its stream is open; a watcher made by
// CreateWatcher compares at each GetWatcherEvents. Events between two listings that cancel out
// (a file made and removed) are not seen.

const (
	pollInterval = 500 * time.Millisecond
	// maxWatchers bounds the watchers kept for GetWatcherEvents; one not read for watcherIdle
	// is dropped.
	maxWatchers = 256
	watcherIdle = 10 * time.Minute
)

// listing is what a watch compares: each path under the directory with its size and time.
type listing map[string]sandbox.FileInfo

func snapshot(ctx context.Context, t Target, req watchRequest) (listing, error) {
	p := resolve(req.Path)
	l, err := t.Engine.ListFiles(ctx, t.Session, p)
	if err != nil {
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			return nil, errorf(codeNotFound, "%s: no such directory to watch", p)
		}
		return nil, err
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	out := listing{}
	for _, f := range l {
		rel, ok := strings.CutPrefix(f.Path, prefix)
		if !ok || (!req.Recursive && strings.Contains(rel, "/")) {
			continue
		}
		out[rel] = f
	}
	return out, nil
}

// diff returns the events that take a to b, named relative to the watched directory.
func diff(a, b listing, withEntry bool) []filesystemEvent {
	var out []filesystemEvent
	ev := func(name, typ string, f *sandbox.FileInfo) {
		e := filesystemEvent{Name: name, Type: typ}
		if withEntry && f != nil {
			ei := entryOf(*f)
			e.Entry = &ei
		}
		out = append(out, e)
	}
	for name, f := range b {
		old, ok := a[name]
		switch {
		case !ok:
			ev(name, eventCreate, &f)
		case !f.Dir && (old.Size != f.Size || !old.ModTime.Equal(f.ModTime)):
			ev(name, eventWrite, &f)
		}
	}
	for name := range a {
		if _, ok := b[name]; !ok {
			ev(name, eventRemove, nil)
		}
	}
	return out
}

// watchDir streams the events of a directory until the client leaves or its timeout passes.
func (h *Handler) watchDir(w http.ResponseWriter, r *http.Request, t Target) {
	var req watchRequest
	err := readStreamRequest(r, &req)
	if err == nil {
		err = checkUser(userOf(r))
	}
	var last listing
	if err == nil {
		last, err = snapshot(r.Context(), t, req)
	}
	s := newStream(w)
	if err != nil {
		s.end(err)
		return
	}
	if s.send(watchDirResponse{Start: &struct{}{}}) != nil {
		return
	}
	ctx := r.Context()
	if d := timeoutOf(r); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	keepalive := keepaliveOf(r)
	quiet := time.Now()
	for {
		select {
		case <-ctx.Done():
			if r.Context().Err() == nil {
				s.end(errorf(codeDeadlineExceeded, "the watch's timeout passed"))
			}
			return
		case <-poll.C:
		}
		next, err := snapshot(ctx, t, req)
		if err != nil {
			s.end(err)
			return
		}
		for _, e := range diff(last, next, req.IncludeEntry) {
			if s.send(watchDirResponse{Filesystem: &e}) != nil {
				return
			}
			quiet = time.Now()
		}
		last = next
		if time.Since(quiet) >= keepalive {
			if s.send(watchDirResponse{Keepalive: &struct{}{}}) != nil {
				return
			}
			quiet = time.Now()
		}
	}
}

// watchers are the watchers CreateWatcher made, each for one session.
type watchers struct {
	mu sync.Mutex
	m  map[string]*watcher
}

type watcher struct {
	session string
	req     watchRequest
	last    listing
	used    time.Time
}

func newWatchers() *watchers { return &watchers{m: map[string]*watcher{}} }

func (ws *watchers) create(ctx context.Context, t Target, req watchRequest) (createWatcherResponse, error) {
	l, err := snapshot(ctx, t, req)
	if err != nil {
		return createWatcherResponse{}, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for k, w := range ws.m {
		if time.Since(w.used) > watcherIdle {
			delete(ws.m, k)
		}
	}
	if len(ws.m) >= maxWatchers {
		return createWatcherResponse{}, errorf(codeResourceExhausted, "this daemon keeps %d watchers already, the most it keeps", maxWatchers).
			withHint("remove watchers you no longer read (RemoveWatcher)")
	}
	ws.m[id] = &watcher{session: t.Session, req: req, last: l, used: time.Now()}
	return createWatcherResponse{WatcherID: id}, nil
}

// get returns watcher id of t's session; another session's is not found.
func (ws *watchers) get(t Target, id string) (*watcher, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.m[id]
	if w == nil || w.session != t.Session {
		return nil, errorf(codeNotFound, "watcher %q not found", id)
	}
	w.used = time.Now()
	return w, nil
}

func (ws *watchers) events(ctx context.Context, t Target, id string) (watcherEventsResponse, error) {
	w, err := ws.get(t, id)
	if err != nil {
		return watcherEventsResponse{}, err
	}
	next, err := snapshot(ctx, t, w.req)
	if err != nil {
		return watcherEventsResponse{}, err
	}
	ws.mu.Lock()
	ev := diff(w.last, next, w.req.IncludeEntry)
	w.last = next
	ws.mu.Unlock()
	if ev == nil {
		ev = []filesystemEvent{}
	}
	return watcherEventsResponse{Events: ev}, nil
}

func (ws *watchers) remove(t Target, id string) error {
	if _, err := ws.get(t, id); err != nil {
		return err
	}
	ws.mu.Lock()
	delete(ws.m, id)
	ws.mu.Unlock()
	return nil
}

// withHint adds what to do to an error's message.
func (e *rpcError) withHint(hint string) *rpcError {
	e.Message += " (" + hint + ")"
	return e
}
