package nano

import (
	"fmt"
	"os"
	"path/filepath"
)

// Artifacts are the files the nano tier runs from, all inside one directory that `agentbox setup`
// fills: the CPython WASI module, its standard library, and wazero's compilation cache.
type Artifacts struct {
	Dir string
}

// The names inside Artifacts.Dir.
const (
	WasmFile   = "python.wasm"
	StdlibFile = "python311.zip" // absent for builds that embed their standard library
	CacheDir   = "cache"
)

func (a Artifacts) Wasm() string     { return filepath.Join(a.Dir, WasmFile) }
func (a Artifacts) Stdlib() string   { return filepath.Join(a.Dir, StdlibFile) }
func (a Artifacts) CacheDir() string { return filepath.Join(a.Dir, CacheDir) }

// HasStdlib reports whether the build keeps its standard library beside the module.
func (a Artifacts) HasStdlib() bool {
	_, err := os.Stat(a.Stdlib())
	return err == nil
}

// Check says what is missing, with what to do about it.
func (a Artifacts) Check() error {
	if _, err := os.Stat(a.Wasm()); err != nil {
		return fmt.Errorf("nano: CPython WASI build not found at %s: run `agentbox setup` first (or pass the same --data-dir to both)", a.Wasm())
	}
	return nil
}
