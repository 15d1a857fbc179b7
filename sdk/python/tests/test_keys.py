"""Tenant keys through the admin API (Client.keys, create_key, rotate_key, revoke_key), and where
the SDK finds its key."""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest
from conftest import KEY

import agentbox
from agentbox import Client, client as client_module
from agentbox.models import CreatedKey, Key

RECORD = {"id": "0123456789abcdef", "tenant": "acme", "agent": "ci-bot", "scopes": ["run", "sessions"],
          "created": "2026-11-22T08:40:00.123456789Z", "expires": "2026-11-22T09:40:00.123456789Z"}


def test_keys_are_listed_and_decoded(stub):
    revoked = dict(RECORD, id="fedcba9876543210", revoked="2026-11-22T08:50:00Z")
    stub.script((200, {"keys": [RECORD, revoked]}))
    got = Client(stub.url, "admin").keys(tenant="acme")
    req = stub.requests[0]
    assert req["method"] == "GET" and req["path"] == "/v1/keys?tenant=acme"
    assert req["headers"]["Authorization"] == "Bearer admin"
    assert [k.id for k in got] == ["0123456789abcdef", "fedcba9876543210"]
    k = got[0]
    assert isinstance(k, Key) and k.tenant == "acme" and k.agent == "ci-bot" and k.scopes == ["run", "sessions"]
    assert k.created == dt.datetime(2026, 11, 22, 8, 40, 0, 123456, tzinfo=dt.timezone.utc) and k.revoked is None
    assert k.active(now=dt.datetime(2026, 11, 22, 9, 0, tzinfo=dt.timezone.utc))
    assert not k.active(now=dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc))
    assert not got[1].active()
    stub.script((200, {"keys": []}))
    assert Client(stub.url, "admin").keys() == [] and stub.requests[0]["path"] == "/v1/keys"


def test_create_key_sends_the_request(stub):
    stub.script((201, {"key": "abt_0123456789abcdef." + "s" * 43, "record": RECORD}))
    made = Client(stub.url, "admin").create_key("acme", ["run", "sessions"], agent="ci-bot", ttl="1h")
    req = stub.requests[0]
    assert req["method"] == "POST" and req["path"] == "/v1/keys"
    assert req["body"] == {"tenant": "acme", "agent": "ci-bot", "scopes": ["run", "sessions"], "ttl": 3600.0}
    assert isinstance(made, CreatedKey) and made.key.startswith("abt_0123456789abcdef.") and made.record.tenant == "acme"
    # The key is a secret: printing the answer does not show it.
    assert "s" * 43 not in repr(made) and "0123456789abcdef" in repr(made)
    # No agent, no lifetime: neither is sent; scopes may be a comma-separated string.
    Client(stub.url, "admin").create_key("acme", "run, files")
    assert stub.requests[1]["body"] == {"tenant": "acme", "scopes": ["run", "files"]}
    with pytest.raises(ValueError):
        Client(stub.url, "admin").create_key("acme", ["run"], ttl="soon")


def test_rotate_and_revoke(stub):
    stub.script((201, {"key": "abt_fedcba9876543210." + "t" * 43, "record": dict(RECORD, id="fedcba9876543210")}), (204, b""))
    c = Client(stub.url, "admin")
    new = c.rotate_key("0123456789abcdef")
    assert new.record.id == "fedcba9876543210" and new.key.startswith("abt_fedcba9876543210.")
    assert c.revoke_key("0123456789abcdef") is None
    assert [(r["method"], r["path"]) for r in stub.requests] == [
        ("POST", "/v1/keys/0123456789abcdef/rotate"), ("DELETE", "/v1/keys/0123456789abcdef")]
    with pytest.raises(ValueError):
        c.revoke_key("")


@pytest.mark.parametrize("status,code,cls", [
    (400, "invalid_request", agentbox.InvalidRequest),
    (403, "forbidden", agentbox.Forbidden),
    (404, "not_found", agentbox.NotFound),
    (409, "conflict", agentbox.Conflict),
])
def test_key_errors_are_typed(stub, status, code, cls):
    stub.script((status, {"error": {"code": code, "message": "m", "hint": "h"}}))
    with pytest.raises(cls) as e:
        Client(stub.url, "k").create_key("acme", ["run"])
    assert e.value.code == code


def test_key_of_a_system_install(tmp_path, monkeypatch):
    own, system = tmp_path / "own", tmp_path / "system"
    own.mkdir()
    system.mkdir()
    monkeypatch.delenv("AGENTBOX_API_KEY", raising=False)
    monkeypatch.setenv("AGENTBOX_DATA_DIR", str(own))
    monkeypatch.setattr(client_module, "SYSTEM_DATA_DIR", system)
    assert Client().api_key == ""
    (system / "api_key").write_text("system-key\n")
    assert Client().api_key == "system-key"
    (own / "api_key").write_text("own-key\n")
    assert Client().api_key == "own-key"
    monkeypatch.setenv("AGENTBOX_API_KEY", "env-key")
    assert Client().api_key == "env-key"
    assert str(client_module.SYSTEM_DATA_DIR) == str(system)
    monkeypatch.undo()
    assert client_module.SYSTEM_DATA_DIR == pathlib.Path("/var/lib/agentbox")


def test_keys_with_a_daemon(keys_daemon):
    admin = Client(keys_daemon.url, KEY)
    made = admin.create_key("acme", ["run", "sessions"], agent="sdk-test", ttl=3600)
    assert made.record.tenant == "acme" and made.record.expires is not None
    assert made.key not in keys_daemon.keys_file.read_text()
    acme = Client(keys_daemon.url, made.key)
    assert acme.list_sessions() == []  # works at once
    with pytest.raises(agentbox.Forbidden):
        acme.keys()
    with pytest.raises(agentbox.InvalidRequest, match="unknown scope"):
        admin.create_key("acme", ["root"])
    assert [k.id for k in admin.keys(tenant="acme")] == [made.record.id]
    new = admin.rotate_key(made.record.id)
    with pytest.raises(agentbox.Unauthorized):
        acme.list_sessions()
    acme = Client(keys_daemon.url, new.key)
    assert acme.list_sessions() == []
    admin.revoke_key(new.record.id)
    with pytest.raises(agentbox.Unauthorized, match="revoked"):
        acme.list_sessions()
    with pytest.raises(agentbox.NotFound):
        admin.revoke_key("0123456789abcdef")
    assert all(not k.active() for k in admin.keys())
