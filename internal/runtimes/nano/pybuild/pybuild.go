// Package pybuild carries the script that builds an optimised CPython for WASI from Debian's own
// CPython source (build.sh, embedded so the binary can run it from anywhere). `agentbox setup`
// runs it; the script documents its output and caches by its own hash.
package pybuild

import _ "embed"

// Script is build.sh. Usage: bash build.sh OUTDIR.
//
//go:embed build.sh
var Script []byte
