package router

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// What besides the code decides the tier: the request's runtime, limits and files, and whether
// the daemon runs a heavy tier at all.
func TestRouteRequests(t *testing.T) {
	opts := fixtureOptions(t)
	noHeavy := opts
	noHeavy.Images = nil
	tests := []struct {
		name    string
		opts    Options
		req     sandbox.RunRequest
		tier    sandbox.Tier
		reasons []string
		err     string // a substring of the error; empty: none
	}{
		{name: "nano requested, stdlib", opts: opts,
			req:  sandbox.RunRequest{Tier: nanoTier, Code: "import json\nprint(json.dumps(1))\n"},
			tier: nanoTier, reasons: []string{"nano: runtime requested"}},
		{name: "nano requested, pandas fails fast", opts: opts,
			req: sandbox.RunRequest{Tier: nanoTier, Code: "import json\nimport pandas as pd\n"},
			err: "runtime nano cannot import pandas (line 2): it is not in the nano build; heavy image python-datascience has it"},
		{name: "nano requested, stdlib module nano lacks", opts: opts,
			req: sandbox.RunRequest{Tier: nanoTier, Code: "def f():\n    import ctypes\n"},
			err: "runtime nano cannot import ctypes (line 2): it is not in the nano build; heavy image python-datascience has it"},
		{name: "nano requested, optional import runs", opts: opts,
			req:  sandbox.RunRequest{Tier: nanoTier, Code: "try:\n    import numpy\nexcept ImportError:\n    numpy = None\n"},
			tier: nanoTier, reasons: []string{"nano: runtime requested"}},
		{name: "nano requested, module no tier has", opts: opts,
			req: sandbox.RunRequest{Tier: nanoTier, Code: "import torch\n"},
			err: "runtime nano cannot import torch (line 1): it is not in the nano build"},
		{name: "nano requested, pandas, no heavy tier", opts: noHeavy,
			req: sandbox.RunRequest{Tier: nanoTier, Code: "import pandas\n"},
			err: "runtime nano cannot import pandas (line 1): it is not in the nano build"},
		{name: "nano requested, module from an input file", opts: opts,
			req:  sandbox.RunRequest{Tier: nanoTier, Code: "import helper\n", Files: []sandbox.File{{Path: "helper.py"}}},
			tier: nanoTier, reasons: []string{"nano: runtime requested"}},
		{name: "nano requested, syntax error", opts: opts,
			req:  sandbox.RunRequest{Tier: nanoTier, Code: "print(1\n"},
			tier: nanoTier, reasons: []string{"nano: SyntaxError at line 1, column 6 (not run)"}},
		{name: "nano requested, memory above nano's cap", opts: opts,
			req: sandbox.RunRequest{Tier: nanoTier, Code: "x = 1", Limits: sandbox.Limits{MemoryBytes: 3 << 30}},
			err: "runtime nano cannot take this request: memory 3072 MiB is above nano's maximum of 2048 MiB"},
		{name: "memory above nano's cap", opts: opts,
			req:  sandbox.RunRequest{Code: "x = 1", Limits: sandbox.Limits{MemoryBytes: 3 << 30}},
			tier: heavyTier, reasons: []string{"heavy: memory 3072 MiB is above nano's maximum of 2048 MiB"}},
		{name: "files limit above nano's cap", opts: opts,
			req:  sandbox.RunRequest{Code: "x = 1", Limits: sandbox.Limits{FilesBytes: 400 << 20}},
			tier: heavyTier, reasons: []string{"heavy: files limit 400 MiB is above nano's maximum of 336 MiB"}},
		{name: "limits within nano's caps", opts: opts,
			req:  sandbox.RunRequest{Code: "x = 1", Limits: sandbox.Limits{MemoryBytes: 2 << 30, FilesBytes: 64 << 20}},
			tier: nanoTier, reasons: []string{"nano: no imports"}},
		{name: "module from an input file", opts: opts,
			req: sandbox.RunRequest{Code: "import helper\nfrom mypkg.sub import thing\nimport json\n",
				Files: []sandbox.File{{Path: "helper.py"}, {Path: "/home/user/mypkg/sub.py"}}},
			tier: nanoTier, reasons: []string{"nano: imports only json (all in nano)", "nano: imports helper, mypkg from the input files"}},
		{name: "input file elsewhere is not importable", opts: opts,
			req:  sandbox.RunRequest{Code: "import helper\n", Files: []sandbox.File{{Path: "/tmp/helper.py"}}},
			tier: heavyTier, reasons: []string{"heavy: imports helper (not in nano nor in any image)"}},
		{name: "no heavy tier", opts: noHeavy,
			req:  sandbox.RunRequest{Code: "import pandas\n"},
			tier: nanoTier, reasons: []string{"heavy: imports pandas (not in nano)", "nano: this daemon runs no heavy tier, so the code runs in nano and may fail there"}},
		{name: "submodule nano lacks", opts: opts,
			req:  sandbox.RunRequest{Code: "from encodings import bz2_codec\n"},
			tier: heavyTier, reasons: []string{"heavy: imports encodings.bz2_codec (not in nano; in image python-datascience)"}},
		{name: "many imports are summarised", opts: opts,
			req:  sandbox.RunRequest{Code: "import json, re, os, sys, math, csv, io, abc\n"},
			tier: nanoTier, reasons: []string{"nano: imports only json, re, os, sys, math, csv and 2 more (all in nano)"}},
		{name: "nano requested, threads run there", opts: opts,
			req:  sandbox.RunRequest{Tier: nanoTier, Code: "from concurrent.futures import ThreadPoolExecutor\nThreadPoolExecutor(2)\n"},
			tier: nanoTier, reasons: []string{"nano: runtime requested"}},
		{name: "threads, no heavy tier", opts: noHeavy,
			req:  sandbox.RunRequest{Code: "import threading\nthreading.Thread(target=print).start()\n"},
			tier: nanoTier, reasons: []string{"heavy: uses threads (threading), which nano cannot start",
				"nano: this daemon runs no heavy tier, so the code runs in nano and may fail there"}},
		{name: "threads, processes and sockets together", opts: opts,
			req: sandbox.RunRequest{Code: "import socket, asyncio, os\nfrom concurrent.futures import ProcessPoolExecutor\nimport _thread\n" +
				"_thread.start_new_thread(print, ())\nasyncio.create_subprocess_exec('ls')\nos.popen('ls')\n"},
			tier: heavyTier, reasons: []string{"heavy: uses threads (_thread), which nano cannot start",
				"heavy: uses subprocesses (concurrent.futures, asyncio.create_subprocess_exec, os.popen), which nano cannot start",
				"heavy: uses sockets (socket), which nano cannot open"}},
		{name: "threads and an import nano lacks", opts: opts,
			req:  sandbox.RunRequest{Code: "import pandas as pd\nimport threading\nt = threading.Timer(1, print)\n"},
			tier: heavyTier, reasons: []string{"heavy: imports pandas (not in nano; in image python-datascience)",
				"heavy: uses threads (threading), which nano cannot start"}},
		{name: "names without their module", opts: opts,
			req:  sandbox.RunRequest{Code: "class Thread: pass\nsystem = 1\ndef fork(): pass\nThread(); fork()\n"},
			tier: nanoTier, reasons: []string{"nano: no imports"}},
		{name: "uses under a dead branch", opts: opts,
			req:  sandbox.RunRequest{Code: "import sys\nif sys.version_info < (3,):\n    import subprocess\nprint(1)\n"},
			tier: nanoTier, reasons: []string{"nano: imports only sys (all in nano)"}},
		{name: "grammar doubt runs", opts: opts,
			req:  sandbox.RunRequest{Code: "x = 1\nprint(f\"{x:=}\")\n"},
			tier: nanoTier, reasons: []string{"nano: no imports", "nano: the grammar could not read line 2; the interpreter decides"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New(tc.opts)
			req := tc.req
			if req.Tier == "" {
				req.Tier = sandbox.TierAuto
			}
			d, err := r.Route(&req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || sandbox.KindOf(err) != sandbox.KindInvalidRequest {
					t.Fatalf("got %v (%s), want invalid_request %q", err, sandbox.KindOf(err), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Tier != tc.tier || !slices.Equal(d.Reasons, tc.reasons) {
				t.Errorf("got %s %q\nwant %s %q", d.Tier, d.Reasons, tc.tier, tc.reasons)
			}
		})
	}
}

// A decision for heavy that rests only on imports no tier has is a guess: a session does not
// move for it. Any other reason for heavy is not.
func TestRouteGuess(t *testing.T) {
	r := New(fixtureOptions(t))
	for _, tc := range []struct {
		code  string
		guess bool
	}{
		{"import helper\n", true},
		{"import helper\nimport pandas\n", false},
		{"import helper\nimport threading\nthreading.Thread(target=print).start()\n", false},
		{"import pandas\n", false},
		{"import json\n", false},
	} {
		d, err := r.Route(&sandbox.RunRequest{Code: tc.code, Tier: sandbox.TierAuto})
		if err != nil {
			t.Fatal(err)
		}
		if d.Guess != tc.guess {
			t.Errorf("%q: guess %v, want %v (%s %q)", tc.code, d.Guess, tc.guess, d.Tier, d.Reasons)
		}
	}
}
