package runtimetest

import (
	"slices"
	"sort"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// catalog holds a tier that states Images to sandbox.Catalog: it lists its images, each with a
// unique name, its Python version and the modules it can import (the standard library among
// them), exactly one of them the default. With an interpreter, a run that names the default image
// runs that Python, and a run that asks for one of its packages works.
func (s *suite) catalog(t *testing.T) {
	if !s.rt.Capabilities().Images {
		t.Skip("the tier states no Images: it lists none (sandbox.Catalog)")
	}
	cat, ok := s.rt.(sandbox.Catalog)
	if !ok {
		t.Fatal("Capabilities state Images, but the runtime is no sandbox.Catalog")
	}
	imgs := cat.Images()
	if len(imgs) == 0 {
		t.Fatal("no images listed")
	}
	var def *sandbox.ImageInfo
	seen := map[string]bool{}
	for i, img := range imgs {
		switch {
		case img.Name == "":
			t.Errorf("image %d has no name: %+v", i, img)
		case seen[img.Name]:
			t.Errorf("image %s is listed twice", img.Name)
		}
		seen[img.Name] = true
		if img.Python == "" {
			t.Errorf("image %s states no Python version", img.Name)
		}
		if !slices.Contains(img.Modules, "json") {
			t.Errorf("image %s lists %d modules, without the standard library's json", img.Name, len(img.Modules))
		}
		if img.Default {
			if def != nil {
				t.Errorf("two default images: %s and %s", def.Name, img.Name)
			}
			def = &imgs[i]
		}
	}
	if def == nil {
		t.Fatalf("no default image among %d", len(imgs))
	}
	if s.opts.NoInterpreter {
		return
	}
	req := s.req(t, "import platform\nprint(platform.python_version())\n")
	req.Image = def.Name
	res := s.run(t, req)
	if res.Error != nil || res.Stdout != def.Python+"\n" {
		t.Errorf("a run of image %s: stdout %q error %+v, want Python %s", def.Name, res.Stdout, res.Error, def.Python)
	}
	if len(def.Packages) > 0 {
		pkgs := make([]string, 0, len(def.Packages))
		for p := range def.Packages {
			pkgs = append(pkgs, p)
		}
		sort.Strings(pkgs)
		req := s.req(t, "print('ok')\n")
		req.Packages = pkgs[:1]
		s.checkOK(t, s.run(t, req), "a run asking for package "+pkgs[0]+" of the default image")
	}
}
