// Package router decides which tier runs a piece of Python: nano (CPython on WASI, standard
// library only, milliseconds) or heavy (gVisor with a Debian image of numpy, pandas, matplotlib…).
//
// It reads the code as the tree-sitter Python grammar does and collects every module the code
// imports: import and from-import statements at any depth (functions, classes, branches),
// relative imports, and __import__("m") and importlib.import_module("m") with literal names.
// Strings and comments are not code, so `exec("import pandas")` and a docstring showing
// `>>> import numpy` import nothing. What the code does at run time (a name computed from data)
// the router cannot see; a ModuleNotFoundError in nano, or nano's refusal to start a thread or
// a process or to open a socket, is then retried once in heavy by the Manager.
//
// The decision rules, in order:
//
//   - a syntax error the router is sure of answers the run at once, as the code's SyntaxError
//     with CPython's message, line and column, and no sandbox starts;
//   - limits or input files above what the nano runtime can take go to heavy;
//   - an import nano's build lacks goes to heavy, naming the image that has it, or saying no
//     image does (the run then fails in heavy with the interpreter's own ModuleNotFoundError);
//   - code that starts threads or processes or opens sockets goes to heavy: nano's interpreter
//     imports threading, subprocess and socket but can do none of it (uses.go says what counts:
//     naming Thread or ThreadPoolExecutor, not importing threading for a lock);
//   - everything else runs in nano.
//
// Imports the code can do without do not count: those in a try whose ImportError handler carries
// on without them (it does not raise or exit), those in such a handler, those under
// contextlib.suppress(ImportError), and those under a condition that is false on every tier (if
// TYPE_CHECKING, sys.version_info and sys.platform tests).
//
// What nano can import is measured, not typed: `agentbox setup` imports every candidate module in
// the nano interpreter and writes the outcome to DATA/nano/modules.json (nano.ProbeModules). What
// heavy can import comes from each image's file system (sandbox.ImageInfo.Modules).
//
// # Syntax errors
//
// tree-sitter's grammar is error-tolerant and follows Python 3.12, while the tiers run 3.11: the
// two disagree in corners (f-string format specs, dedented lines inside brackets). An error is
// reported only when the router is sure: CPython's tokenizer rules (strings, brackets,
// continuation lines, indentation), re-implemented here in scan.go, agree that something is wrong,
// or the grammar's error lies outside the corners where it is known to be wrong. On doubt the
// code runs and the interpreter decides. Indentation errors, which the grammar does not see, come
// from the scan alone.
//
// # Cost
//
// tree-sitter's parse is the cost of reading code that way (about 6 ms for 1,000 lines here),
// so the router reads it first without tree-sitter (fast.go): the syntax scan hands out the
// tokens it reads anyway, a parser for a subset of tree-sitter-python's grammar reads them, and
// the same rules judge what it finds. Where that reading cannot vouch for tree-sitter's (a syntax
// error, code outside the subset, the corners where tree-sitter reads valid Python with an error,
// a comment where tree-sitter would make it a node the rules look at), it stops and tree-sitter
// reads the code: the fast path never guesses. Tests hold the two to the same analysis over the
// fixtures, generated and mutated code and the standard library.
//
// When tree-sitter reads, it calls back into Go for every allocation unless told otherwise; this
// package makes it use the C library's allocator (alloc.go). Parsers are reused; the tree is not
// walked node by node (each step would be a cgo call) but asked only where the source holds the
// word import. A parse has a time budget (parseBudget: 100 ms plus 1 µs per byte), because
// tree-sitter's error recovery can take minutes over a few hundred KB of broken code and this
// runs in the daemon; code not read in time runs in nano, and the ModuleNotFoundError fallback
// covers its imports.
package router
