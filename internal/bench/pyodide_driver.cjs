// Pyodide driver of `agentbox bench nano` (embedded in the agentbox binary, written next to the
// pyodide package it installs). It loads Pyodide once, says how long that took, then answers
// JSON-line commands read from stdin with JSON lines on stdout:
//
//   {"op":"latency","code":"print('hi')","n":200}
//       one {"event":"iter","ms":…,"stdout":…} per runPython(code), then {"event":"done"}.
//       Only runPython is timed, with performance.now(); writing the line is not.
//   {"op":"exec","code":"…"}
//       {"event":"result","ms":…,"stdout":…,"stderr":…,"error":…}
//
// Python's stdout and stderr go to callbacks (one call per line), never to this process's stdout.
"use strict";

const readline = require("readline");

function send(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

async function main() {
  const tRequire = performance.now();
  const { loadPyodide } = require("pyodide");
  const requireMs = performance.now() - tRequire;
  let out = [];
  let err = [];
  const tLoad = performance.now();
  const py = await loadPyodide({
    stdout: (s) => out.push(s),
    stderr: (s) => err.push(s),
  });
  const loadMs = performance.now() - tLoad;
  const python = py.runPython("import sys; sys.version.split()[0]");
  send({
    event: "ready",
    load_ms: loadMs,
    require_ms: requireMs,
    // performance.now() counts from the start of this node process.
    since_start_ms: performance.now(),
    version: py.version,
    python: python,
  });

  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (e) {
      send({ event: "error", error: "bad command: " + e });
      continue;
    }
    switch (cmd.op) {
      case "latency":
        for (let i = 0; i < cmd.n; i++) {
          out = [];
          err = [];
          const t = performance.now();
          try {
            py.runPython(cmd.code);
          } catch (e) {
            send({ event: "error", error: String(e) });
            break;
          }
          const ms = performance.now() - t;
          send({ event: "iter", ms: ms, stdout: out.join("\n") });
        }
        send({ event: "done" });
        break;
      case "exec": {
        out = [];
        err = [];
        let error = "";
        const t = performance.now();
        try {
          py.runPython(cmd.code);
        } catch (e) {
          error = String(e);
        }
        const ms = performance.now() - t;
        send({ event: "result", ms: ms, stdout: out.join("\n"), stderr: err.join("\n"), error: error });
        break;
      }
      default:
        send({ event: "error", error: "unknown op " + JSON.stringify(cmd.op) });
    }
  }
}

main().catch((e) => {
  send({ event: "error", error: String(e && e.stack ? e.stack : e) });
  process.exit(1);
});
