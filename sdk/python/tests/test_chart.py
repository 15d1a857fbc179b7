"""A chart drawn with matplotlib in the heavy tier comes back as a PNG artifact, saved to a file,
with what it shows (its chart data)."""

from __future__ import annotations

import hashlib

import pytest

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
    # What the figure shows, read from its axes.
    assert art.chart["type"] == "line" and art.chart["title"] == "squares"
    assert art.chart["elements"][0]["points"][3] == [3, 9]


def test_artifact_download_is_checked(stub, tmp_path):
    """Artifact.save against a stub: the bytes of GET /v1/artifacts/{id}, checked against sha256."""
    from support import result_body

    import agentbox

    png = PNG_SIGNATURE + b"rest of a picture"
    chart = {"type": "bar", "title": "t", "elements": [{"label": "a", "group": "g", "value": 1.0}]}
    art = {"id": "art_1", "name": "figure-1.png", "mime": "image/png", "size": len(png),
           "sha256": hashlib.sha256(png).hexdigest(), "chart": chart}
    stub.script((200, result_body(runtime="heavy", artifacts=[art])), (200, png, "image/png"))
    res = Sandbox(url=stub.url, api_key="k", stateful=False).run("plt.show()")
    assert res.artifacts[0].chart == chart
    assert res.artifacts[0].save(tmp_path / "f.png").read_bytes() == png
    assert [r["path"] for r in stub.requests] == ["/v1/run", "/v1/artifacts/art_1"]
    assert res.artifacts[0].save(tmp_path).name == "figure-1.png"
    assert len(stub.requests) == 2  # downloaded once

    stub.script((200, result_body(artifacts=[dict(art, sha256="00" * 32)])), (200, png[:5], "image/png"))
    res = Sandbox(url=stub.url, api_key="k", stateful=False).run("plt.show()")
    with pytest.raises(agentbox.AgentboxError, match="sha256"):
        res.artifacts[0].save(tmp_path / "g.png")
