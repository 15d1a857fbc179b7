"""Named volumes against a real daemon with gVisor: Client.create_volume and SandboxConfig(volumes=...)."""

from __future__ import annotations

import pytest

import agentbox
from agentbox import Client, Sandbox, SandboxConfig


def test_volume_outlives_its_session(heavy):
    c = Client()
    v = c.create_volume("sdk-data", quota_bytes=4 << 20)
    assert (v.name, v.quota_bytes, v.mounted_rw) == ("sdk-data", 4 << 20, 0)
    try:
        with Sandbox(SandboxConfig(volumes={"sdk-data": "/mnt/data"})) as box:
            r = box.run("open('/mnt/data/a.txt', 'w').write('kept'); print('ok')")
            assert r.stdout == "ok\n" and r.runtime == "heavy"
            assert c.get_volume("sdk-data").mounted_rw == 1
            with pytest.raises(agentbox.Conflict):
                Sandbox(SandboxConfig(volumes={"sdk-data": "/mnt/data"})).run("print(1)")
            r = box.run("try:\n    open('/mnt/data/big', 'wb').write(b'x' * (8 << 20))\nexcept OSError as e:\n    print(e.errno)")
            assert r.stdout == "28\n"
        assert c.read_volume_file("sdk-data", "a.txt") == b"kept"
        c.write_volume_file("sdk-data", "dir/b.txt", b"from the API")
        with pytest.raises(agentbox.OutputLimitExceeded):
            c.write_volume_file("sdk-data", "a.txt", b"y" * (8 << 20))
        with Sandbox(SandboxConfig(volumes={"sdk-data": "/mnt/data:ro"})) as box:
            assert box.run("print(open('/mnt/data/a.txt').read(), open('/mnt/data/dir/b.txt').read())").stdout == "kept from the API\n"
        assert [x.name for x in c.volumes()] == ["sdk-data"]
    finally:
        c.delete_volume("sdk-data")
    with pytest.raises(agentbox.NotFound):
        c.get_volume("sdk-data")


def test_volumes_need_a_session(daemon):
    with pytest.raises(ValueError):
        Sandbox(SandboxConfig(volumes={"x": "/mnt/x"}), stateful=False).run("print(1)")
