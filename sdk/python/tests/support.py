"""Test support: a scripted HTTP stub and bodies shaped like the daemon's answers."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, Dict, List, Tuple

# --- a scripted HTTP stub, for answers a real daemon cannot be made to give on demand --------

Reply = Tuple[int, Any]  # (status, JSON-able body or bytes)


class Stub:
    """An HTTP server answering from a script. Each reply is (status, body[, content type]) or a function of the
    recorded request (a dict: method, path, headers, body) returning one; the last reply repeats.
    Requests are recorded in order."""

    def __init__(self) -> None:
        self.replies: List[Any] = []
        self.requests: List[Dict[str, Any]] = []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                req = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                stub.requests.append(req)
                reply = stub.replies[min(len(stub.requests), len(stub.replies)) - 1]
                if callable(reply):
                    reply = reply(req)
                status, out = reply[0], reply[1]
                ctype = reply[2] if len(reply) > 2 else ("text/html" if isinstance(out, bytes) else "application/json")
                data = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Request-Id", f"req-{len(stub.requests)}")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def script(self, *replies: Any) -> "Stub":
        self.replies = list(replies)
        self.requests = []
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def result_body(**kw: Any) -> Dict[str, Any]:
    """A Result as the daemon writes it, with kw replacing members."""
    r: Dict[str, Any] = {
        "stdout": "", "stderr": "", "exit_code": 0, "error": None, "runtime": "nano",
        "routing": {"tier": "nano", "reasons": ["nano: stub"]}, "stdout_truncated": False,
        "stderr_truncated": False, "files": [], "artifacts": [], "outputs": [],
        "timings": {"queue_ms": 0, "start_ms": 0, "execute_ms": 1, "total_ms": 1, "pool": "warm"},
    }
    r.update(kw)
    return r


def error_body(code: str, message: str = "stub says no", hint: str = "a hint", result: Any = None) -> Dict[str, Any]:
    b: Dict[str, Any] = {"error": {"code": code, "message": message, "hint": hint}}
    if result is not None:
        b["result"] = result
    return b
