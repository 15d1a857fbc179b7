package heavy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
)

// A template is a checkpoint (`runsc checkpoint`) of a sandbox that booted with the default
// limits and imported the preload, and nothing else: no user code has ever run in it. Warm
// sandboxes are restored from it (`runsc restore` into a new container with its own cgroup,
// bundle and stdio pipes), which is faster than booting and importing again (FIGURES.md).
//
// Templates live in STATE/templates/KEY, where KEY hashes everything the checkpoint depends on:
// the runsc binary, the image and its guest agent, the sandbox's spec and runsc flags, the
// preload and the protocol version. A daemon that finds its key's template reuses it; other
// keys' templates are removed when a runtime takes the state directory.
type template struct {
	key string
	dir string // the checkpoint image
	meta
}

// meta is what a template records about itself in meta.json.
type meta struct {
	Key           string        `json:"key"`
	Created       time.Time     `json:"created"`
	PythonVersion string        `json:"python_version"`
	Features      []string      `json:"features,omitempty"` // the guest's (proto.Feature*)
	Preload       []string      `json:"preload"`
	Prepare       time.Duration `json:"prepare"`    // boot + preload of the sandbox checkpointed
	Checkpoint    time.Duration `json:"checkpoint"` // `runsc checkpoint`
	Bytes         int64         `json:"bytes"`      // the image on disk
	// Files are the image's files with their sizes (and hashes of the small ones), to tell a
	// broken template from restores that fail under load (templatecheck.go).
	Files map[string]fileSum `json:"files,omitempty"`
}

const metaFile = "meta.json"

func (rt *Runtime) templatesDir() string { return filepath.Join(rt.layout.Dir, "templates") }

// templateKey hashes what a checkpoint of the default sandbox depends on.
func (rt *Runtime) templateKey() (string, error) {
	st, err := os.Stat(rt.opts.Runsc)
	if err != nil {
		return "", err
	}
	bs := rt.boxSpec(rt.img, rt.opts.DefaultLimits)
	var root [2]int64 // the EROFS root's size and time: a checkpoint restores only onto the same file
	if bs.erofs != "" {
		est, err := os.Stat(bs.erofs)
		if err != nil {
			return "", err
		}
		root = [2]int64{est.Size(), est.ModTime().UnixNano()}
	}
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, v := range []any{
		proto.Version, rt.opts.Runsc, st.Size(), st.ModTime().UnixNano(),
		rt.img.Dir, rt.img.Manifest.Hash, rt.img.Manifest.GuestSHA256,
		bs.spec(), rt.runscFlags(rt.opts.DefaultLimits), rt.preload, root,
	} {
		if err := enc.Encode(v); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// loadTemplate returns the template of key if a previous runtime left it, and removes every other
// template and half-made one.
func (rt *Runtime) loadTemplate(key string) *template {
	ents, _ := os.ReadDir(rt.templatesDir())
	var found *template
	for _, e := range ents {
		dir := filepath.Join(rt.templatesDir(), e.Name())
		if e.Name() == key {
			var m meta
			b, err := os.ReadFile(filepath.Join(dir, metaFile))
			if err == nil && json.Unmarshal(b, &m) == nil && m.Key == key {
				found = &template{key: key, dir: dir, meta: m}
				continue
			}
		}
		_ = os.RemoveAll(dir)
	}
	return found
}

// makeTemplate boots a warm sandbox and checkpoints it into STATE/templates/KEY. The sandbox ends
// with its checkpoint.
func (rt *Runtime) makeTemplate(ctx context.Context, key string) (*template, error) {
	if err := os.MkdirAll(rt.templatesDir(), 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	b, err := rt.bootWarm(ctx)
	if err != nil {
		return nil, err
	}
	defer b.kill()
	prepared := time.Since(start)
	tmp, err := os.MkdirTemp(rt.templatesDir(), key+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // after the rename below there is nothing left to remove
	img := filepath.Join(tmp, "image")
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, prepTimeout)
	defer cancel()
	out, err := rt.runsc.command(cctx, rt.runscFlags(b.limits), "checkpoint", "--image-path", img, b.id).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("runsc checkpoint: %v: %s", err, strings.TrimSpace(string(out)))
	}
	took := time.Since(t0)
	// The container ends with its checkpoint; the guest's frames end with it.
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		return nil, errors.New("the sandbox did not end after its checkpoint")
	}
	files, err := sumFiles(img)
	if err != nil {
		return nil, err
	}
	m := meta{Key: key, Created: time.Now().UTC(), PythonVersion: b.python, Features: b.features, Preload: rt.opts.Preload,
		Prepare: prepared, Checkpoint: took, Bytes: dirSize(img), Files: files}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, metaFile), raw, 0o600); err != nil {
		return nil, err
	}
	dir := filepath.Join(rt.templatesDir(), key)
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return &template{key: key, dir: dir, meta: m}, nil
}

// describe says what the template is, for Health and PoolStats.
func (t *template) describe() string {
	return fmt.Sprintf("checkpoint %s of a sandbox with %s imported (%d MiB, made in %v + %v)",
		t.key, strings.Join(t.Preload, ", "), t.Bytes>>20, t.Prepare.Round(time.Millisecond), t.Checkpoint.Round(time.Millisecond))
}

func (t *template) image() string { return filepath.Join(t.dir, "image") }

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// restoreBox starts a warm sandbox from t, in the background (for the pool) or not (for a
// request): a new container restored from the checkpoint, with its own cgroup, bundle and stdio
// pipes (runsc hands the restoring process's stdio to the restored container). The guest sends no hello after a restore; its answer to the reseed cell shows it
// is alive, within RestoreTimeout (notes/gvisor.md: one restore in ~90 never answered).
func (rt *Runtime) restoreBox(ctx context.Context, t *template, background bool) (*box, error) {
	start := time.Now()
	b, err := rt.newBox(rt.img, rt.opts.DefaultLimits, background, !rt.opts.NoTemplateSharing)
	if err != nil {
		return nil, err
	}
	b.python, b.features = t.PythonVersion, t.Features
	if err := b.launch(ctx, rt, "restore", []string{"--image-path", t.image()}, false); err != nil {
		return nil, err
	}
	b.restored = true
	rt.mu.Lock()
	fault := rt.restoreFault
	rt.mu.Unlock()
	if fault != nil {
		if err := fault(); err != nil {
			b.kill()
			return nil, fmt.Errorf("the restored sandbox did not answer: %v", err)
		}
	}
	if err := b.runQuiet(ctx, reseedCode, rt.opts.RestoreTimeout); err != nil {
		b.kill()
		return nil, fmt.Errorf("the restored sandbox did not answer: %v (%s)", err, b.tail.String())
	}
	b.startTime = time.Since(start)
	return b, nil
}
