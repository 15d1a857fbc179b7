// Package images holds the recipes of the heavy tier's images, embedded in the agentbox binary so
// `agentbox image build NAME` works from an installed binary. A recipe is a directory with one
// file, "recipe": "key: value" lines (description, suite, variant) and Debian package names, one
// or more per line; "#" starts a comment.
package images

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed */recipe
var recipes embed.FS

// Default is the image the heavy tier runs unless told otherwise.
const Default = "python-datascience"

// Names lists the embedded recipes.
func Names() []string {
	ents, _ := fs.ReadDir(recipes, ".")
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Recipe returns the recipe file of the named image.
func Recipe(name string) ([]byte, bool) {
	b, err := recipes.ReadFile(name + "/recipe")
	return b, err == nil
}
