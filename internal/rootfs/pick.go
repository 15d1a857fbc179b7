package rootfs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Has reports whether the image offers a package: a Python distribution (by PEP 503 name, e.g.
// "pandas", "Pillow"), an import name listed in the distribution's metadata (e.g. "PIL"), or a
// Debian package name ("python3-pandas").
func (m Manifest) Has(pkg string) bool {
	n := Normalize(pkg)
	if _, ok := m.Python[n]; ok {
		return true
	}
	for _, d := range m.Python {
		for _, mod := range d.Modules {
			if mod == pkg {
				return true
			}
		}
	}
	_, ok := m.Debian[pkg]
	return ok
}

// Pick returns the first image (in the order given: the default first) that has every package,
// or an invalid_request error that names the images and what each offers.
func Pick(imgs []Image, packages []string) (Image, error) {
	if len(imgs) == 0 {
		return Image{}, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "no image is built").
			WithHint("run `agentbox image build %s`", "python-datascience")
	}
	for _, img := range imgs {
		ok := true
		for _, p := range packages {
			if !img.Manifest.Has(p) {
				ok = false
				break
			}
		}
		if ok {
			return img, nil
		}
	}
	var missing []string
	for _, p := range packages {
		found := false
		for _, img := range imgs {
			found = found || img.Manifest.Has(p)
		}
		if !found {
			missing = append(missing, p)
		}
	}
	var offers []string
	for _, img := range imgs {
		offers = append(offers, fmt.Sprintf("%s (%s)", img.Manifest.Name, img.Manifest.Offer(8)))
	}
	what := "no single image has all of " + strings.Join(packages, ", ")
	if len(missing) > 0 {
		what = "no image has " + strings.Join(missing, ", ")
	}
	return Image{}, sandbox.Errorf(sandbox.KindInvalidRequest, "%s; images: %s", what, strings.Join(offers, "; ")).
		WithHint("ask for packages these images offer, or add a recipe under images/ and run `agentbox image build NAME`")
}

// notable are the distributions an image's summary names first.
var notable = []string{"numpy", "pandas", "matplotlib", "scipy", "pillow", "scikit-learn", "sympy", "requests"}

// Offer summarises the image's Python packages: the notable ones first, with versions, then up to
// n others.
func (m Manifest) Offer(n int) string {
	var parts []string
	seen := map[string]bool{}
	for _, k := range notable {
		if d, ok := m.Python[k]; ok {
			parts = append(parts, d.Name+" "+d.Version)
			seen[k] = true
		}
	}
	var rest []string
	for k, d := range m.Python {
		if !seen[k] {
			rest = append(rest, d.Name+" "+d.Version)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return strings.ToLower(rest[i]) < strings.ToLower(rest[j]) })
	if len(rest) > n {
		rest = append(rest[:n], fmt.Sprintf("and %d more", len(rest)-n))
	}
	parts = append(parts, rest...)
	if m.PythonVersion != "" {
		parts = append([]string{"python " + m.PythonVersion}, parts...)
	}
	return strings.Join(parts, ", ")
}
