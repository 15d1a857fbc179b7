package heavy

import (
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Interface guards.
var _ sandbox.Catalog = (*Runtime)(nil)

// Images describes the built images for clients, the default first.
func (rt *Runtime) Images() []sandbox.ImageInfo {
	var out []sandbox.ImageInfo
	for i, img := range rt.images() {
		m := img.Manifest
		pk := make(map[string]string, len(m.Python))
		for _, d := range m.Python {
			pk[d.Name] = d.Version
		}
		out = append(out, sandbox.ImageInfo{Name: m.Name, Hash: m.Hash, Default: i == 0, Python: m.PythonVersion, Packages: pk,
			Modules: rt.modules.get(img), SizeBytes: m.SizeBytes, Built: m.Built})
	}
	return out
}

// images returns the built images, the runtime's default first. The list is read from the image
// store on each call, so an image built while the daemon runs can be asked for at once.
func (rt *Runtime) images() []rootfs.Image {
	all, err := rt.opts.Layout.Images().List()
	if err != nil {
		rt.log.Warn("heavy: cannot list images", "err", err)
	}
	out := []rootfs.Image{rt.img}
	for _, img := range all {
		if img.Manifest.Name != rt.img.Manifest.Name {
			out = append(out, img)
		}
	}
	return out
}

// pick chooses the image for a request: the named one, which must have packages, or else the
// first (the default first) that has all the packages.
func (rt *Runtime) pick(packages []string, name string) (rootfs.Image, error) {
	if name == "" && len(packages) == 0 {
		return rt.img, nil
	}
	imgs := rt.images()
	if name == "" {
		return rootfs.Pick(imgs, packages)
	}
	i := slices.IndexFunc(imgs, func(img rootfs.Image) bool { return img.Manifest.Name == name })
	if i < 0 {
		var names []string
		for _, img := range imgs {
			names = append(names, img.Manifest.Name)
		}
		return rootfs.Image{}, sandbox.Errorf(sandbox.KindInvalidRequest, "no heavy image is named %q; built images: %s", name, strings.Join(names, ", ")).
			WithHint("ask for one of these, or add a recipe under images/ and run `agentbox image build %s`", name)
	}
	return rootfs.Pick(imgs[i:i+1], packages)
}

// checkPackages refuses a session run that asks for packages its sandbox's image lacks: a
// session's image is chosen when it is created.
func (s *session) checkPackages(packages []string, name string) error {
	b := s.boxNow()
	if b == nil {
		return sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	if name != "" && name != b.img.Manifest.Name {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "this session runs image %q, not %q", b.img.Manifest.Name, name).
			WithHint("choose the image when creating the session")
	}
	for _, p := range packages {
		if !b.img.Manifest.Has(p) && !slices.Contains(s.ondemand, p) {
			return sandbox.Errorf(sandbox.KindInvalidRequest, "this session's image %q has no package %q; it offers %s", b.img.Manifest.Name, p, b.img.Manifest.Offer(8)).
				WithHint("a session's image is chosen when it is created: create a session with these packages")
		}
	}
	return nil
}
