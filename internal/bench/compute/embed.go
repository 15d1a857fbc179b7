// Package compute holds the fixed compute benchmark set: small CPython
// snippets, each printing a short result, used to compare Python runtimes.
package compute

import "embed"

// FS holds the snippets, one NAME.py file each.
//
//go:embed *.py
var FS embed.FS
