"""A chart drawn with matplotlib in the heavy tier comes back as a PNG artifact, saved to a file."""

from __future__ import annotations

import hashlib

from agentbox import Sandbox, SandboxConfig

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

CHART = """import matplotlib.pyplot as plt
xs = list(range(10))
plt.plot(xs, [x * x for x in xs])
plt.title("squares")
plt.show()
"""


def test_chart_is_saved_as_png(heavy, tmp_path):
    with Sandbox(SandboxConfig(packages=["matplotlib"])) as box:
        res = box.run(CHART)
    assert res.ok, res.stderr
    assert res.runtime == "heavy"
    pngs = [a for a in res.artifacts if a.mime == "image/png"]
    assert pngs, f"no PNG artifact in {res.artifacts}"
    art = pngs[0]
    path = art.save(tmp_path / "chart.png")
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) == art.size and hashlib.sha256(data).hexdigest() == art.sha256
    # A directory keeps the artifact's own name.
    assert art.save(tmp_path).name == (art.name or art.id)
