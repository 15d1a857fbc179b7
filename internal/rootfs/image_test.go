package rootfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/images"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestParseRecipe(t *testing.T) {
	r, err := ParseRecipe("x", []byte("# c\ndescription: d\nsuite: bookworm\npython3 python3-numpy # inline\n\npython3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Description != "d" || r.Suite != "bookworm" || r.Variant != "minbase" || strings.Join(r.Packages, ",") != "python3,python3-numpy" {
		t.Errorf("got %+v", r)
	}
	for name, bad := range map[string]string{
		"no packages":  "# nothing\n",
		"bad package":  "Python3\n",
		"unknown key":  "arch: arm64\npython3\n",
		"bad variant":  "variant: huge\npython3\n",
		"shell tricks": "python3;rm\n",
	} {
		if _, err := ParseRecipe("x", []byte(bad)); err == nil {
			t.Errorf("%s: accepted %q", name, bad)
		}
	}
	if _, err := ParseRecipe("../etc", []byte("python3\n")); err == nil {
		t.Error("accepted a name with a path in it")
	}
}

func TestEmbeddedRecipes(t *testing.T) {
	r, err := LoadRecipe(images.Default)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"python3", "python3-numpy", "python3-pandas", "python3-matplotlib", "python3-scipy", "fonts-dejavu-core"} {
		if !contains(r.Packages, want) {
			t.Errorf("%s lacks %s", images.Default, want)
		}
	}
	if _, err := LoadRecipe("nope"); err == nil || !strings.Contains(err.Error(), images.Default) {
		t.Errorf("unknown recipe: %v", err)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestHash(t *testing.T) {
	a, _ := ParseRecipe("x", []byte("description: one\npython3\npython3-numpy\n"))
	b, _ := ParseRecipe("x", []byte("description: two\npython3-numpy python3\npython3\n"))
	c, _ := ParseRecipe("x", []byte("python3\n"))
	d, _ := ParseRecipe("x", []byte("suite: trixie\npython3\npython3-numpy\n"))
	if a.Hash() != b.Hash() {
		t.Error("order, duplicates or the description changed the hash")
	}
	if a.Hash() == c.Hash() || a.Hash() == d.Hash() {
		t.Error("packages or suite did not change the hash")
	}
}

func TestMirror(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"), []byte(`Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
# a comment
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
`), 0o644)
	if got := mirrorFrom(dir, "bookworm"); got != "http://mirror.example/debian" {
		t.Errorf("deb822: %q", got)
	}
	os.WriteFile(filepath.Join(dir, "sources.list"), []byte("deb [arch=amd64] http://one.example/debian bookworm main contrib\n"), 0o644)
	if got := mirrorFrom(dir, "bookworm"); got != "http://one.example/debian" {
		t.Errorf("one-line: %q", got)
	}
	if got := mirrorFrom(dir, "trixie"); got != DefaultMirror {
		t.Errorf("no source for the suite: %q", got)
	}
}

// fakeRootfs writes the files a manifest is read from.
func fakeRootfs(t *testing.T, rootfs string) {
	t.Helper()
	files := map[string]string{
		"var/lib/dpkg/status": "Package: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n\n" +
			"Package: python3-numpy\nStatus: install ok installed\nVersion: 1:1.24.2-1\n\n" +
			"Package: python3-kiwisolver\nStatus: install ok installed\nVersion: 1.4.4-1+b1\n\n" +
			"Package: removed\nStatus: deinstall ok config-files\nVersion: 1\n",
		"var/lib/dpkg/info/python3-numpy.list":                              "/usr/lib/python3/dist-packages/numpy-1.24.2.egg-info\n",
		"var/lib/dpkg/info/python3-kiwisolver:amd64.list":                   "/usr/lib/python3/dist-packages/kiwisolver-0.0.0.dist-info\n",
		"usr/lib/python3/dist-packages/numpy-1.24.2.egg-info/PKG-INFO":      "Metadata-Version: 2.1\nName: numpy\nVersion: 1.24.2\n\nName: not-this\n",
		"usr/lib/python3/dist-packages/numpy-1.24.2.egg-info/top_level.txt": "numpy\n",
		"usr/lib/python3/dist-packages/kiwisolver-0.0.0.dist-info/METADATA": "Name: kiwisolver\nVersion: 0.0.0\n",
		"usr/lib/python3/dist-packages/Pillow-9.4.0.egg-info/PKG-INFO":      "Name: Pillow\nVersion: 9.4.0\n",
		"usr/lib/python3/dist-packages/Pillow-9.4.0.egg-info/top_level.txt": "PIL\n",
		"etc/passwd": "root:x:0:0:root:/root:/bin/bash\n",
		"etc/group":  "root:x:0:\n",
	}
	for name, content := range files {
		p := filepath.Join(rootfs, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestManifestFromImage(t *testing.T) {
	root := t.TempDir()
	fakeRootfs(t, root)
	var m Manifest
	if err := fillManifest(&m, root); err != nil {
		t.Fatal(err)
	}
	if m.PythonVersion != "3.11.2" || m.Debian["python3-numpy"] != "1:1.24.2-1" || m.Debian["removed"] != "" {
		t.Errorf("debian: %v, python %s", m.Debian, m.PythonVersion)
	}
	if d := m.Python["numpy"]; d.Version != "1.24.2" || d.Debian != "python3-numpy" || strings.Join(d.Modules, ",") != "numpy" {
		t.Errorf("numpy: %+v", d)
	}
	if d := m.Python["kiwisolver"]; d.Version != "1.4.4" {
		t.Errorf("a 0.0.0 placeholder should take the Debian version: %+v", d)
	}
	for _, p := range []string{"numpy", "NumPy", "pillow", "PIL", "python3-numpy"} {
		if !m.Has(p) {
			t.Errorf("Has(%q) = false", p)
		}
	}
	if m.Has("torch") {
		t.Error("Has(torch)")
	}
}

func TestPick(t *testing.T) {
	a := Image{Manifest: Manifest{Name: "small", PythonVersion: "3.11.2", Python: map[string]PyDist{"numpy": {Name: "numpy", Version: "1.24.2"}}}}
	b := Image{Manifest: Manifest{Name: "big", Python: map[string]PyDist{"numpy": {Name: "numpy", Version: "1.24.2"}, "pandas": {Name: "pandas", Version: "1.5.3"}}}}
	imgs := []Image{a, b}
	if got, err := Pick(imgs, []string{"numpy"}); err != nil || got.Manifest.Name != "small" {
		t.Errorf("numpy: %v %v", got.Manifest.Name, err)
	}
	if got, err := Pick(imgs, []string{"pandas", "numpy"}); err != nil || got.Manifest.Name != "big" {
		t.Errorf("pandas: %v %v", got.Manifest.Name, err)
	}
	_, err := Pick(imgs, []string{"pandas", "torch"})
	if !errors.Is(err, sandbox.ErrInvalidRequest) {
		t.Fatalf("torch: %v", err)
	}
	for _, want := range []string{"no image has torch", "small (python 3.11.2, numpy 1.24.2)", "big (numpy 1.24.2, pandas 1.5.3)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := Pick(nil, nil); !errors.Is(err, sandbox.ErrRuntimeUnavailable) {
		t.Errorf("no images: %v", err)
	}
}

// A build with debootstrap replaced: the image lands atomically with its manifest and agent; a
// second build is a cache hit that only refreshes a changed agent; a failed build leaves
// nothing.
func TestBuildCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown of the user's home needs root")
	}
	s := Store{Dir: t.TempDir()}
	r, _ := ParseRecipe("test", []byte("python3\n"))
	guest := filepath.Join(t.TempDir(), "guest")
	os.WriteFile(guest, []byte("\x7fELF static one"), 0o755)
	calls := 0
	fake := func(_ context.Context, args []string, _ io.Writer) error {
		calls++
		fakeRootfs(t, args[len(args)-2])
		return nil
	}
	erofs := 0
	fakeErofs := func(_ context.Context, rootfs, file string, _ io.Writer) error {
		erofs++
		g, err := os.ReadFile(filepath.Join(rootfs, GuestPath))
		if err != nil {
			return err
		}
		return os.WriteFile(file, append([]byte("erofs of "), g...), 0o644)
	}
	var out bytes.Buffer
	img, built, err := s.Build(context.Background(), r, BuildOptions{Guest: guest, Mirror: "http://m.example/debian", Out: &out, Debootstrap: fake, Erofs: fakeErofs})
	if err != nil || !built || calls != 1 {
		t.Fatalf("build: %v built=%v calls=%d\n%s", err, built, calls, out.String())
	}
	got, err := s.Get("test")
	if err != nil || got.Dir != img.Dir || got.Manifest.Hash != r.Hash() || got.Manifest.Mirror != "http://m.example/debian" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Rootfs(), GuestPath)); string(b) != "\x7fELF static one" {
		t.Errorf("guest not in the image")
	}
	if b, _ := os.ReadFile(filepath.Join(img.Rootfs(), "etc/passwd")); !strings.Contains(string(b), "user:x:1000:1000") {
		t.Errorf("no user in the image")
	}
	if b, _ := os.ReadFile(got.Erofs()); erofs != 1 || string(b) != "erofs of \x7fELF static one" {
		t.Errorf("EROFS copy %q (%q, %d made)", got.Erofs(), b, erofs)
	}
	os.WriteFile(guest, []byte("\x7fELF static two"), 0o755)
	out.Reset()
	if _, built, err := s.Build(context.Background(), r, BuildOptions{Guest: guest, Out: &out, Debootstrap: fake, Erofs: fakeErofs}); err != nil || built || calls != 1 {
		t.Fatalf("second build: %v built=%v calls=%d", err, built, calls)
	}
	if got, _ := s.Get("test"); erofs != 2 || got.Erofs() == "" {
		t.Errorf("the EROFS copy was not made again with the new guest (%d made)", erofs)
	} else if b, _ := os.ReadFile(got.Erofs()); string(b) != "erofs of \x7fELF static two" {
		t.Errorf("EROFS copy after the guest update: %q", b)
	}
	if !strings.Contains(out.String(), "guest agent updated") {
		t.Errorf("second build: %s", out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(img.Rootfs(), GuestPath)); string(b) != "\x7fELF static two" {
		t.Errorf("guest not refreshed")
	}
	// Without mkfs.erofs the image is still built and current; it has no EROFS copy.
	os.WriteFile(guest, []byte("\x7fELF static three"), 0o755)
	noErofs := func(context.Context, string, string, io.Writer) error { return errors.New("mkfs.erofs: not found") }
	if _, _, err := s.Build(context.Background(), r, BuildOptions{Guest: guest, Out: &out, Debootstrap: fake, Erofs: noErofs}); err != nil {
		t.Fatalf("a build without mkfs.erofs: %v", err)
	}
	if got, _ := s.Get("test"); got.Erofs() != "" {
		t.Errorf("an EROFS copy holding an older guest is still offered: %s", got.Erofs())
	}
	r2, _ := ParseRecipe("broken", []byte("python3\n"))
	_, _, err = s.Build(context.Background(), r2, BuildOptions{Guest: guest, Debootstrap: func(context.Context, []string, io.Writer) error { return errors.New("mirror unreachable") }})
	if err == nil || !strings.Contains(err.Error(), "mirror unreachable") {
		t.Fatalf("failed build: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir, "broken")); len(ents) != 0 {
		t.Errorf("a failed build left %v", ents)
	}
	os.WriteFile(guest, []byte("\x7fELF needs /lib64/ld-linux-x86-64.so.2"), 0o755)
	if _, _, err := s.Build(context.Background(), r, BuildOptions{Guest: guest, Debootstrap: fake}); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamic guest: %v", err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Manifest.Name != "test" {
		t.Errorf("list: %+v %v", list, err)
	}
}

// Prune keeps each image's current build and removes the others, and leaves what is not a build
// alone.
func TestPrune(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	mk := func(name, hash string) string {
		d := filepath.Join(s.Dir, name, hash)
		if err := os.MkdirAll(filepath.Join(d, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "rootfs", "big"), make([]byte, 1000), 0o644)
		if err := (Manifest{Name: name, Hash: hash}).write(d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	old, cur := mk("py", "aaaa"), mk("py", "bbbb")
	if err := s.setCurrent("py", "bbbb"); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(s.Dir, "py", "notes")
	os.MkdirAll(other, 0o755)
	building := filepath.Join(s.Dir, "py", ".build-cccc-1")
	os.MkdirAll(building, 0o755)
	got, err := s.Prune()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != old || got[0].Bytes < 1000 {
		t.Fatalf("pruned %+v", got)
	}
	for _, keep := range []string{cur, other, building} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s removed", keep)
		}
	}
}
