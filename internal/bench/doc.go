// Package bench is `agentbox bench`: end-to-end benchmarks that print figures a person can paste
// into a note and rerun. Each figure comes with the same figure for baselines measured in the same
// run, so a ratio still means something on a small, noisy machine (CONVENTIONS.md item 13).
// Micro figures belong in `go test -bench` next to the code; this package measures what a user
// of the API sees.
//
// # Running it
//
//	agentbox setup                 # once: the nano artifacts in the data directory
//	agentbox bench nano            # 5–10 minutes on 2 cores; add -json for a machine-readable form
//	agentbox bench nano -n 50 -no-compute    # a quick look
//	agentbox bench nano -url http://127.0.0.1:8420 -cold-url http://127.0.0.1:8421
//
// Without -url (or AGENTBOX_URL) the bench starts its own daemons inside its own process, one
// after the other, never two at once: the manager from internal/daemon built from the data
// directory's artifacts, served by the daemon on a random loopback port with a random key,
// and called through the public client package over HTTP like any other client. The first has
// the default configuration (warm pool on), the second nano.warm = 0; both have the heavy tier
// off (its pool would take the CPU the nano figures are measured on) and room for the density
// scenario's sessions (sessions.max, and an idle timeout of an hour). Their log is
// DATA_DIR/bench/daemon.log. With -url the warm scenarios go to that daemon and the cold ones to
// -cold-url, a daemon configured with nano.warm = 0; without -cold-url they are skipped.
//
// Progress goes to stderr, the report to stdout. The exit status is non-zero if any measurement
// failed; the report says which and why, and everything else is still measured.
//
// # What it installs
//
// What the baselines need and the machine lacks is installed, idempotently, and said in the
// report's notes: Debian's bubblewrap package with apt-get (needs root), and the npm package
// pyodide (DefaultPyodideVersion: 0.25.1, CPython 3.11 like the native baseline) into
// DATA_DIR/bench/pyodide with `npm install --prefix`, next to the embedded driver script
// (pyodide_driver.cjs) it writes there.
//
// # The figures
//
// Every scenario makes 3 untimed warm-up runs, then -n timed ones (default 200). Median and p99
// are over the timed runs; p99 is the nearest-rank percentile (with 200 runs, the third slowest),
// min the fastest. runs/s is the number of timed runs divided by the wall time they took together.
// The code is `print("hi")` and every run's output is checked.
//
// Latency table (one client):
//   - python3 -c (native): the system interpreter (/usr/bin/python3, else python3 from PATH;
//     -python to change it; its sys.executable is run, so a pyenv shim is not timed) from process
//     start to exit, with a minimal environment.
//   - python3 -c under bwrap: the same under bubblewrap with new user, PID, network, IPC, UTS and
//     cgroup namespaces, all capabilities dropped, an empty root holding /usr, the /bin and /lib
//     links and the interpreter's prefix read-only, private /proc, /dev and /tmp. The exact command
//     is in the notes.
//   - Pyodide cold: loadPyodide() timed inside node, and node start → Pyodide ready timed from
//     outside, over 3 fresh node processes.
//   - Pyodide warm: runPython('print("hi")') in one node process that has Pyodide loaded, timed
//     inside node around runPython only. No process boundary and no isolation beyond V8's: the
//     floor of what any Wasm CPython can do, not a sandbox to compare with one-for-one.
//   - nano one-shot, warm pool: POST /v1/run end to end (client, HTTP, manager, worker hand-over,
//     result), paced: before each run the bench polls GET /v1/health every 5 ms until the nano
//     runtime reports every worker free and as many warm interpreters as at rest (-pace 500ms
//     uses a fixed pause instead). This is the latency of a run at a rate the pool sustains;
//     refill competes with nothing. The row says the median wait and how many runs a warm
//     interpreter served (the result's timings.pool).
//   - nano run in a session: POST /v1/sessions/{id}/run of
//     `x = x + 1 if 'x' in globals() else 0; print(x)`, checking that x counts up (state carries
//     over); the session is created once, and the row says how long that took.
//   - nano session create → first result: POST /v1/sessions (runtime nano), then
//     `print("hi")` in it, timed together from the client, as a program starting a session waits;
//     each session is closed after, untimed. Its ratio columns divide by the native and bwrap
//     rows, interpreters started the same way for the same line.
//   - nano one-shot, pool off (cold): POST /v1/run against a daemon with nano.warm = 0: every run
//     starts an interpreter in a worker.
//
// Ratio columns divide the median by the median of native python3 (÷ native) and of bwrap
// (÷ bwrap) from the same run: 2.00x means twice as long.
//
// Throughput table (-c clients, default 4, each starting its next run as soon as its last one
// returned; -n runs in all): runs/s, and the latency of each run under that load. For nano with
// the warm pool this measures the refill: on 2 cores a parked interpreter is handed over in under
// a millisecond, but starting the next one costs ~100–250 ms of CPU, so sustained throughput is
// bounded by refill CPU, and the row says how many runs still met a warm interpreter. Ratios are
// runs/s ÷ the baseline's runs/s at the same concurrency: 0.50x means half as many runs per second.
//
// Idle sessions (density; -idle-sessions K, default 100, 0 skips it; -sessions-1000 for issue
// 11's target): K nano sessions on the warm daemon, opened -c at a time, each running
// `data = list(range(100)); print(sum(data))`, then left idle. PSS (from /proc/PID/smaps_rollup)
// is summed over the daemon and every descendant process (the workers; processes sharing one
// address space, such as gVisor's stub processes, counted once), before opening and
// after, each time with the one-shot pool at rest and the Go heap returned to the kernel; the
// row gives the difference ÷ K, then how many sessions answered `print(len(data))` with their
// state. The baselines are K python3 processes (and K under bubblewrap) started as the latency
// baselines are, each reading cells on stdin, having run the same cell, summed over the bench and
// its children. Opening stops when the machine's available memory would fall below max(1 GiB, a
// tenth of the total): the row then says how many opened. With -url the scenario is skipped: the
// bench can only read the memory of a daemon it started.
//
// A Targets table holds the figures against issue 11's goals: one-shot ≤ 5 ms p50, session
// create → first result ≤ 10 ms p50 and ≤ 25 ms p99, ≤ 8 MiB PSS per idle session, and 1,000 idle
// sessions all answering (measured with -sessions-1000).
//
// Compute table: the fixed snippets of internal/bench/compute (-reps times each, default 5, the
// median reported) on native python3, on nano through POST /v1/run (timeout 5 minutes), and on
// Pyodide in one warm node process. Each is wrapped so that it times itself: the wrapper imports
// the modules the snippet's top-level import lines name, compiles the snippet, reads
// time.perf_counter(), exec()s it in a fresh namespace as __main__, reads the clock again and
// prints the difference on a marker line the bench parses. Interpreter start, the API, the worker
// hand-over and imports are excluded on every engine (Pyodide's warm process would otherwise find
// a snippet's modules imported from the second repetition on, where native and nano import them
// every time). Native python3 and Pyodide (in a node process of its own) run at the niceness of
// nano's workers (nano.WorkerNice, 5; with coreutils' nice): under other load a nice 5 process gets
// a third of a nice 0 one's CPU share, which would compare priorities, not compute. The engines are
// interleaved while the warm daemon is up: each repetition runs every
// snippet on every engine before the next repetition, one snippet on all engines before the next
// snippet, the engine going first rotating from one snippet (and repetition) to the next, and
// before every run on every engine the bench waits (untimed) until the daemon's workers are all
// free and its warm interpreters back to their count before the last nano run: a run that grew its
// interpreter's memory is followed by a fresh interpreter's start in its worker, which would
// otherwise compete with the next run. On a
// 2-core machine shared with other work, a burst of someone else's build then slows every engine
// alike; until 2026-11-28 each engine had a phase of its own, and one burst could double one
// engine's figures and order the geomeans either way. The ratio columns
// divide by native, and the geomean row is the geometric mean of those ratios over every snippet
// (left out if a snippet failed on that engine: a geomean over a subset would not compare with
// another run's). A snippet whose output differs from native's is listed under the table.
//
// # agentbox bench heavy
//
//	sudo bin/agentbox bench heavy          # ~3 minutes on 2 cores; -json for a machine-readable form
//	sudo bin/agentbox bench heavy -n 10 -no-boot -reps 3    # a quick look
//
// It drives the heavy runtime (package heavy) in this process, as root, on the data directory's
// runsc and image, with a state directory of its own (DATA_DIR/bench/heavy; log:
// DATA_DIR/bench/heavy.log), so a running daemon's sandboxes are never touched. Two runtimes, one
// after the other: first the default one (pool of 2, filled by restoring a checkpoint), then one
// with NoRestore and the pool off. The baselines are the image's own python3 run natively in a
// chroot of the image as uid 1000 with the guest's environment, measured first, while no sandbox
// runs. Scenarios:
//   - session start (sequential, each when the pool is full and idle; the session is closed after
//     its first cell): the create call alone, and create → result of the first cell
//     `import pandas as pd; print(pd.__version__)`, served by a pool hit, by a restore (pool
//     resized to 0) and by a boot (NoRestore, pool off: the first cell then imports pandas).
//     Ratios divide by `python3 -c` of that cell natively, process start to exit.
//   - cells in a warm session: sessionCode; the baseline is a native python3 REPL over a pipe.
//   - refill: from an empty, idle pool, the time until -refill (8) sandboxes are warm, by restore
//     and by boot + import; sandboxes/s = 8 ÷ the median; the ratio divides by the boot path's.
//   - compute: a pure-Python loop and a 1e6-row pandas groupby/aggregate, imports untimed, body
//     timed inside the interpreter, natively and in a heavy session (1 CPU), repetitions
//     alternating between the two.
//   - through the HTTP API (-no-http skips them), on a daemon started in this process with the
//     heavy tier in its default configuration (its own state directory, the same one) and room for
//     the scenarios' sandboxes: a one-shot `print("hi")` (POST /v1/run, runtime heavy), paced so
//     each run meets a full pool; session create → first result from -creators (10) clients at
//     once, -n sessions in all, from a full and idle pool; and the memory of -idle-sessions (10)
//     idle heavy sessions, as for nano: PSS of the daemon and its runsc processes.
//
// A Targets table holds the figures against issue 3's and 11's goals, and the header says how
// busy the CPUs were with other work in an idle second before and after the run, and the load
// average: another busy process on a 2-core machine skews everything.
//
// The nano figures depend on the CPython WASI build (the npm -O0 build is ~2x slower than the
// -O2 one setup can build); the report's header names the build the data directory holds.
//
// # agentbox bench egress
//
// What the egress gateway adds to a small HTTPS request, in this process against a loopback
// origin, and the DLP scanner's throughput; see its -h.
//
// # agentbox bench mcp
//
//	sudo bin/agentbox bench mcp            # ~15 s on 2 cores; -json for a machine-readable form
//
// What the gateway of the hosted MCP servers adds to a tool call (server-everything's echo, warm):
// the same package from the node-mcp image run on the host by Node over stdio (the baseline: what
// the gateway speaks to a hosted server) and over its own streamable HTTP, then hosted in gVisor on
// a daemon in this process through /mcp/servers/everything and through /mcp as everything__echo;
// then the cold start of a newly registered server (its first tools/list). See its -h.
//
// # agentbox bench packages
//
//	sudo bin/agentbox bench packages       # ~40 s on 2 cores with -n 5; -json for a machine-readable form
//
// What installing a package on demand adds to a heavy session's create → first result: a session
// that installs nothing (the baseline), one that installs a package the daemon has never seen from
// a PEP 503 index the bench serves over HTTPS from a network namespace (cold), and one whose
// package is in the daemon's wheel cache (warm), interleaved round by round. See its -h.
//
// # Layout
//
// One package, a file set per target over a shared core. Every target's results have one shape,
// Report, whose rows are one type, Row, written by one report writer; a target brings its
// settings, its machine description, its compute section and the layout of its report.
//
//   - main.go: the subcommands, their flag sets, defaults written once (fillDefaults).
//   - results.go, report.go, goals.go, emit.go: Report and Row, the ratio columns, the Markdown
//     skeleton with its tables and footnotes, the Targets table, JSON or Markdown out.
//   - stats.go, measure.go: medians and percentiles; calls made one after the other or from
//     clients back to back.
//   - benchmark.go, machine.go: a run in progress (settings, progress log, report); the host.
//   - target.go, target_http.go, calls.go, pace.go, daemons.go: a daemon as the scenarios use it,
//     through its HTTP API; the calls made the same way on every tier; pacing to a pool at rest;
//     daemons started in this process.
//   - density.go, pss.go: the memory of idle sessions and of the baselines' processes.
//   - process.go, timing.go: interpreters the bench starts (timed runs, REPLs over a pipe), and
//     time measured inside the interpreter.
//   - nano*.go: `bench nano`: settings and flags, scenarios, baselines (native, bwrap, Pyodide
//     and what the bench installs for them), the compute set, the daemons, the report.
//   - heavy*.go: `bench heavy`: settings and flags, the runtime in process, the native chroot
//     baselines, scenarios, the compute cells, the HTTP scenarios, the report.
//   - mcp_*.go: `bench mcp`: settings, flags and the report over Report and Row; the daemon with
//     the hosted server, the direct server, the calls.
//   - packages.go: `bench packages`: the index (internal/pkgindex) in its network namespace
//     (internal/netns), the daemon that installs from it, the three ways, the report.
//   - egress*.go: `bench egress`, whose results keep their own flat shape: a table of request
//     latencies and a throughput, with no machine description, rows of baselines or targets.
package bench
