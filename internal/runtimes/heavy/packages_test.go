package heavy

import (
	"os"
	"path/filepath"
	"testing"
)

// The cache is keyed by the index and the set of names as pip sees them: order, case and
// separators do not matter, the index does.
func TestCacheKey(t *testing.T) {
	a := cacheKey("https://pypi.org/simple", []string{"Foo_Bar", "baz"})
	if b := cacheKey("https://pypi.org/simple", []string{"baz", "foo-bar", "baz"}); a != b {
		t.Fatalf("same set, other keys: %s %s", a, b)
	}
	if b := cacheKey("https://mirror.example/simple", []string{"baz", "foo-bar"}); a == b {
		t.Fatal("another index, same key")
	}
	if b := cacheKey("https://pypi.org/simple", []string{"baz"}); a == b {
		t.Fatal("another set, same key")
	}
}

// A wheel name from the sandbox is a file name in the entry, never a path out of it.
func TestStoreWheelsRefusesPaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "k")
	if err := storeWheels(root, dir, map[string][]byte{"../x.whl": []byte("x")}); err == nil {
		t.Fatal("a path was stored")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused entry was kept: %v", err)
	}
	if err := storeWheels(root, dir, map[string][]byte{"a-1-py3-none-any.whl": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a-1-py3-none-any.whl")); err != nil || string(b) != "x" {
		t.Fatalf("%q %v", b, err)
	}
}
