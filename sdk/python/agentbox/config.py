"""SandboxConfig and the parsers of human sizes and durations ("512MB", "30s")."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

RUNTIMES = ("auto", "nano", "heavy")

_duration_part = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_size = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_size_mib = {"b": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20}


def parse_duration(v: Union[None, int, float, str]) -> Optional[float]:
    """Seconds from a number of seconds or a Go-style duration: "30s", "1.5s", "500ms", "5m", "1h30m".

    None stays None (the server's default). Zero or negative durations are refused.
    """
    if v is None:
        return None
    if isinstance(v, bool):
        raise TypeError("a duration is a number of seconds or a string like '30s', not a bool")
    if isinstance(v, (int, float)):
        secs = float(v)
    else:
        s = v.strip().replace(" ", "")
        try:
            secs = float(s)
        except ValueError:
            pos, secs = 0, 0.0
            for m in _duration_part.finditer(s):
                if m.start() != pos:
                    break
                n = float(m.group(1))
                secs += {"ms": n / 1000, "s": n, "m": n * 60, "h": n * 3600}[m.group(2)]
                pos = m.end()
            if pos != len(s) or not s:
                raise ValueError(f"duration {v!r}: use seconds (30, 1.5) or units ms, s, m, h ('30s', '5m')") from None
    if not math.isfinite(secs) or secs <= 0:
        raise ValueError(f"duration {v!r} must be positive")
    return secs


def parse_memory(v: Union[None, int, float, str]) -> Optional[int]:
    """MiB from a number of MiB or a size: "512MB", "512MiB", "2GB", "1.5G", "256M".

    The API counts memory in MiB, so "MB" and "MiB" mean the same here (2**20 bytes), and "GB"
    means 1024 MiB. Sizes are rounded up to whole MiB. None stays None (the server's default).
    """
    if v is None:
        return None
    if isinstance(v, bool):
        raise TypeError("a memory size is a number of MiB or a string like '512MB', not a bool")
    if isinstance(v, (int, float)):
        mib = float(v)
    else:
        m = _size.match(v)
        if not m:
            raise ValueError(f"memory {v!r}: use MiB (512) or a size like '512MB', '2GB'")
        unit = (m.group(2) or "m").lower()[0]
        mib = float(m.group(1)) * _size_mib[unit]
    if not math.isfinite(mib) or mib <= 0:
        raise ValueError(f"memory {v!r} must be positive")
    return int(math.ceil(mib))


@dataclass
class SandboxConfig:
    """What a :class:`~agentbox.Sandbox` asks of the daemon. Every field is optional.

    Attributes:
        runtime: "auto" (default) lets the daemon pick a tier by the code's imports; "nano" is
            CPython on WebAssembly (starts in milliseconds, standard library only); "heavy" is a
            gVisor sandbox with numpy, pandas, matplotlib.
        packages: Python packages the code needs ("pandas"). They pick the heavy image that has
            them all and mean runtime heavy; those no image has are installed on demand with pip
            from the daemon's package index (the egress profile must allow it), and one the index
            lacks is refused with InvalidRequest naming it.
        timeout: Seconds each run may take (a number, or "30s", "5m"). Default: the server's
            (30 s).
        memory: The memory cap in MiB (a number, or "512MB", "2GB"). Default: the server's
            (256 MiB).
        env: Environment variables of the code.
        image: A heavy image by name (see Client.images()); implies heavy.
        network: Give the sandbox a way out through the daemon's egress gateway (heavy only; it
            implies heavy). Every request is checked by the egress profile, the SSRF guard and
            DLP; a refused one gets HTTP 403 with the reason in its body.
        egress_profile: The egress profile (default "default"; also "strict", "api-only" or the
            operator's own).
        volumes: Named volumes (Client.create_volume) to mount, by name, at absolute paths:
            ``{"data": "/mnt/data"}``, or ``"/mnt/data:ro"`` read-only. They mean runtime heavy
            and a session; their files outlive it.
    """

    runtime: str = "auto"
    packages: List[str] = field(default_factory=list)
    timeout: Union[None, float, str] = None
    memory: Union[None, int, str] = None
    env: Dict[str, str] = field(default_factory=dict)
    image: Optional[str] = None
    network: bool = False
    egress_profile: Optional[str] = None
    volumes: Dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime {self.runtime!r}: use one of {', '.join(RUNTIMES)}")
        if isinstance(self.packages, str):
            self.packages = [self.packages]
        self.packages = list(self.packages or [])
        self.env = dict(self.env or {})
        self.volumes = dict(self.volumes or {})
        # Fail on a bad size or duration here, not at the first run.
        parse_duration(self.timeout)
        parse_memory(self.memory)

    @property
    def timeout_seconds(self) -> Optional[float]:
        return parse_duration(self.timeout)

    @property
    def memory_mb(self) -> Optional[int]:
        return parse_memory(self.memory)

    @property
    def wants_image(self) -> bool:
        """Whether packages, an image, network or volumes are asked for (which mean the heavy tier)."""
        return bool(self.packages) or bool(self.image) or self.network or bool(self.volumes)
