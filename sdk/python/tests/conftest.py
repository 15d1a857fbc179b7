"""Fixtures: real agentbox daemons started by the tests, and a scripted HTTP stub.

The daemons are `bin/agentbox serve` (built with `go build` unless AGENTBOX_BIN names a binary)
on a free loopback port, with their own heavy state, artifact directories and tenant key file,
and the runtimes' artifacts from the usual data directory (`agentbox setup`). They need root, as
the daemon does.
When a daemon or its heavy tier cannot run here the tests that need it skip and say why, unless
AGENTBOX_REQUIRE_PRIVILEGED=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional

import pytest
from support import Stub

REPO = pathlib.Path(__file__).resolve().parents[3]
REQUIRE = os.environ.get("AGENTBOX_REQUIRE_PRIVILEGED") == "1"
KEY = "sdk-test-key"


def missing(reason: str) -> None:
    """Skip, or fail when CI requires privileged tests to run."""
    if REQUIRE:
        pytest.fail(f"{reason} (AGENTBOX_REQUIRE_PRIVILEGED=1 turns this skip into a failure)", pytrace=False)
    pytest.skip(reason)


_binary_path: Optional[str] = None


def agentbox_binary() -> str:
    global _binary_path
    if _binary_path is None:
        b = os.environ.get("AGENTBOX_BIN")
        if b:
            _binary_path = str(pathlib.Path(b).resolve())
        else:
            out = REPO / "bin" / "agentbox"
            subprocess.run(["go", "build", "-o", str(out), "./cmd/agentbox"], cwd=REPO, check=True)
            _binary_path = str(out)
    return _binary_path


class Daemon:
    """One `agentbox serve` process."""

    def __init__(self, name: str, config: Dict[str, Any]) -> None:
        self.name = name
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=f"agentbox-sdk-{name}-"))
        self.keys_file = self.dir / "keys.json"
        self.config = dict(config, listen="127.0.0.1:0", artifacts_dir=str(self.dir / "artifacts"),
                           audit={"dir": str(self.dir / "audit")}, keys_file=str(self.keys_file),
                           volumes_dir=str(self.dir / "volumes"),
                           sessions=dict(config.get("sessions", {}), dir=str(self.dir / "sessions")))
        self.config.setdefault("heavy", {})
        if self.config["heavy"].get("enabled") != "off":
            self.config["heavy"] = dict(self.config["heavy"], state_dir=str(self.dir / "heavy"))
        self.log = self.dir / "daemon.log"
        self.url = ""
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 60.0) -> None:
        cfg = self.dir / "config.json"
        cfg.write_text(json.dumps(self.config))
        env = dict(os.environ, AGENTBOX_API_KEY=KEY)
        env.pop("AGENTBOX_LISTEN", None)
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen([agentbox_binary(), "serve", "--config", str(cfg)], env=env,
                                         stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"listening on (http://\S+)", self.log.read_text(errors="replace"))
            if m:
                self.url = m.group(1)
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon {self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            time.sleep(0.05)
        else:
            raise RuntimeError(f"daemon {self.name} did not listen within {timeout}s:\n{self.tail()}")
        self.wait_healthy(deadline)

    def wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/v1/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"daemon {self.name} not healthy:\n{self.tail()}")

    def health(self) -> Dict[str, Any]:
        try:
            with urllib.request.urlopen(self.url + "/v1/health", timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:  # 503 still has the body
            return json.loads(e.read())

    def runtime_ok(self, name: str) -> bool:
        return any(rt["name"] == name and rt["ok"] for rt in self.health().get("runtimes", []))

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _start(name: str, config: Dict[str, Any]) -> Daemon:
    if os.geteuid() != 0:
        missing("the agentbox daemon needs root (its nano workers are jailed with namespaces)")
    d = Daemon(name, config)
    try:
        d.start()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        d.stop()
        missing(f"cannot start an agentbox daemon: {e}")
    return d


@pytest.fixture(scope="session")
def daemon():
    """The main daemon, with the heavy tier when this machine can run it. AGENTBOX_URL and
    AGENTBOX_API_KEY point at it for the whole session, so Sandbox() finds it as a user's would."""
    d = _start("main", {"heavy": {"warm": 1}, "sessions": {"max": 16}})
    mp = pytest.MonkeyPatch()
    mp.setenv("AGENTBOX_URL", d.url)
    mp.setenv("AGENTBOX_API_KEY", KEY)
    yield d
    mp.undo()
    d.stop()


@pytest.fixture
def heavy(daemon):
    """The main daemon, which must run the heavy tier."""
    if not daemon.runtime_ok("heavy"):
        missing("the daemon has no heavy tier here (needs root, runsc and the image from `agentbox setup`): "
                + json.dumps(daemon.health()))
    return daemon


#: The small daemon's max_body_bytes: oversized uploads are refused with a 413 naming it.
SMALL_MAX_BODY = 2 << 20


@pytest.fixture(scope="session")
def small_daemon():
    """A second daemon without the heavy tier, with room for two sessions and bodies of at most
    SMALL_MAX_BODY: for runtime_unavailable, conflict, oversized bodies and @task's retries
    against a real daemon."""
    d = _start("small", {"heavy": {"enabled": "off"}, "sessions": {"max": 2}, "nano": {"workers": 1, "warm": 0},
                         "max_body_bytes": SMALL_MAX_BODY})
    yield d
    d.stop()


@pytest.fixture(scope="session")
def keys_daemon():
    """A daemon without the heavy tier, for the admin API of keys (POST /v1/keys...). Like every
    daemon here it keeps its tenant keys in a file of its own (keys_file), not the data
    directory's."""
    d = _start("keys", {"heavy": {"enabled": "off"}, "nano": {"workers": 1, "warm": 0}})
    yield d
    d.stop()


@pytest.fixture
def stub():
    """A scripted HTTP server (support.Stub), for answers a real daemon cannot give on demand."""
    s = Stub()
    yield s
    s.close()
