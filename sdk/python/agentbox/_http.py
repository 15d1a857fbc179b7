"""A small HTTP/1.1 client on asyncio streams, for :class:`agentbox.AsyncClient`.

Standard library only. One :class:`Pool` per client keeps at most ``max_connections`` connections
to the daemon, reused (keep-alive) from one request to the next; a request beyond that waits for a
connection instead of opening another, so hundreds of concurrent sandboxes on one client make a
bounded number of connections, not a storm of them.

It speaks what the daemon speaks: Content-Length or chunked bodies, ``Connection: close``, and
``Expect: 100-continue`` for large bodies (the daemon refuses an oversized body by its length
before reading it, and the refusal reaches the caller instead of a reset connection).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Awaitable, Callable, Dict, List, Optional, Tuple

#: How long a request with ``Expect: 100-continue`` waits for the go-ahead before it sends the
#: body anyway (a server that ignores Expect; RFC 9110 section 10.1.1).
EXPECT_WAIT = 3.0
#: The longest status line or header line accepted.
MAX_LINE = 64 * 1024


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.1 as this client reads it."""


class Response:
    """A complete answer: status, headers (lower-case names) and body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class _Conn:
    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - closing a broken transport
            pass

    @property
    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()


class Pool:
    """Keep-alive connections to one host, at most ``size`` at a time.

    The pool belongs to the event loop it was first used on; the connections cannot move to
    another loop.
    """

    def __init__(self, host: str, port: int, *, tls: bool, size: int) -> None:
        if size < 1:
            raise ValueError("max_connections must be at least 1")
        self.host = host
        self.port = port
        self.size = size
        self._ssl: Optional[ssl.SSLContext] = ssl.create_default_context() if tls else None
        self._idle: List[_Conn] = []
        self._sem: Optional[asyncio.Semaphore] = None
        self._open = 0
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections open now (idle and in use)."""
        return self._open

    def _semaphore(self) -> asyncio.Semaphore:
        # Made on first use, inside the loop (Python 3.9 binds a Semaphore to the loop current
        # when it is made).
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.size)
        return self._sem

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl, limit=MAX_LINE)
        self._open += 1
        return _Conn(reader, writer)

    def _discard(self, c: _Conn) -> None:
        c.close()
        self._open -= 1

    async def close(self) -> None:
        """Close the idle connections; connections in use close when their requests end."""
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            self._discard(c)
        for c in idle:
            try:
                await c.writer.wait_closed()
            except Exception:  # noqa: BLE001
                pass

    async def request(self, method: str, target: str, headers: Dict[str, str], body: Optional[bytes],
                      *, expect_continue: bool = False,
                      on_data: Optional[Callable[[bytes], Awaitable[None]]] = None) -> Response:
        """Send one request and read the whole answer.

        A connection the server closed while it was idle in the pool (its keep-alive timeout) is
        noticed when the request finds no answer at all on it; the request is then sent once more
        on a new connection. Any other failure is raised (OSError, asyncio.IncompleteReadError,
        ProtocolError).

        With ``on_data``, a successful (2xx) answer that is not JSON is handed to it piece by piece
        as it arrives (a stream), and the Response's body is empty.
        """
        if self._closed:
            raise ProtocolError("the client is closed")
        sem = self._semaphore()
        async with sem:
            for attempt in (0, 1):
                c = None
                while self._idle:
                    cand = self._idle.pop()
                    if cand.usable:
                        c = cand
                        break
                    self._discard(cand)
                if c is None:
                    c = await self._connect()
                keep = False
                try:
                    resp, keep = await self._exchange(c, method, target, headers, body, expect_continue, on_data)
                except _StaleConnection:
                    self._discard(c)
                    if attempt == 0:
                        continue
                    raise ConnectionResetError("the daemon closed the connection without answering")
                except BaseException:
                    # Cancelled or failed mid-exchange: the connection's state is unknown.
                    self._discard(c)
                    raise
                if keep and not self._closed:
                    c.reused = True
                    self._idle.append(c)
                else:
                    self._discard(c)
                return resp
        raise AssertionError("unreachable")

    async def _exchange(self, c: _Conn, method: str, target: str, headers: Dict[str, str], body: Optional[bytes],
                        expect_continue: bool,
                        on_data: Optional[Callable[[bytes], Awaitable[None]]] = None) -> Tuple[Response, bool]:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header()}"]
        h = dict(headers)
        if body is not None or method in ("POST", "PUT", "PATCH"):
            h["Content-Length"] = str(len(body or b""))
        if expect_continue and body:
            h["Expect"] = "100-continue"
        else:
            expect_continue = False
        lines += [f"{k}: {v}" for k, v in h.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if expect_continue:
                c.writer.write(head)
                await c.writer.drain()
            else:
                c.writer.write(head + (body or b""))
                await c.writer.drain()
        except (ConnectionError, OSError):
            if c.reused:
                raise _StaleConnection() from None
            raise
        sent_body = not expect_continue
        while True:
            if not sent_body:
                try:
                    status, hdrs = await asyncio.wait_for(self._read_head(c), EXPECT_WAIT)
                except _NoAnswer:
                    if c.reused:
                        raise _StaleConnection() from None
                    raise ConnectionResetError("the daemon closed the connection without answering") from None
                except asyncio.TimeoutError:
                    # No go-ahead: a server that ignores Expect. wait_for cancelled the read mid-way
                    # only if bytes had started to come, which a silent server does not send.
                    c.writer.write(body or b"")
                    await c.writer.drain()
                    sent_body = True
                    continue
            else:
                try:
                    status, hdrs = await self._read_head(c)
                except _NoAnswer:
                    if c.reused:
                        raise _StaleConnection() from None
                    raise ConnectionResetError("the daemon closed the connection without answering") from None
            if status == 100 and not sent_body:
                c.writer.write(body or b"")
                await c.writer.drain()
                sent_body = True
                continue
            if 100 <= status < 200:
                continue  # another informational answer: the final one follows
            if on_data is not None and 200 <= status < 300 and \
                    not hdrs.get("content-type", "").startswith("application/json"):
                await self._read_body(c, method, status, hdrs, on_data)
                data = b""
            else:
                data = await self._read_body(c, method, status, hdrs)
            keep = sent_body and hdrs.get("connection", "").lower() != "close"
            return Response(status, hdrs, data), keep

    def _host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self._ssl else 80
        return host if self.port == default else f"{host}:{self.port}"

    async def _read_head(self, c: _Conn) -> Tuple[int, Dict[str, str]]:
        line = await c.reader.readline()
        if not line:
            raise _NoAnswer()
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {line[:80]!r}")
        status = int(parts[1])
        hdrs: Dict[str, str] = {}
        if parts[0] == "HTTP/1.0":
            hdrs["connection"] = "close"  # HTTP/1.0 closes unless it says keep-alive, which we do not ask for
        while True:
            line = await c.reader.readline()
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
            if line in (b"\r\n", b"\n"):
                break
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ProtocolError(f"not an HTTP header line: {line[:80]!r}")
            name = name.strip().lower()
            value = value.strip()
            if name == "connection" and parts[0] == "HTTP/1.0":
                continue
            hdrs[name] = f"{hdrs[name]}, {value}" if name in hdrs else value
        return status, hdrs

    async def _read_body(self, c: _Conn, method: str, status: int, hdrs: Dict[str, str],
                         on_data: Optional[Callable[[bytes], Awaitable[None]]] = None) -> bytes:
        """The body; with on_data, each piece goes to it as it arrives and b"" is returned."""
        out = bytearray()

        async def put(piece: bytes) -> None:
            if on_data is not None:
                await on_data(piece)
            else:
                out.extend(piece)

        if method == "HEAD" or status in (204, 304):
            return b""
        if "chunked" in hdrs.get("transfer-encoding", "").lower():
            while True:
                size_line = await c.reader.readline()
                if not size_line:
                    raise asyncio.IncompleteReadError(bytes(out), None)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await c.reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(out)
                await put(await c.reader.readexactly(size))
                await c.reader.readexactly(2)
        n = hdrs.get("content-length")
        if n is not None:
            left = int(n)
            while left > 0:
                piece = await c.reader.read(min(left, 1 << 16))
                if not piece:
                    raise asyncio.IncompleteReadError(bytes(out), left)
                left -= len(piece)
                await put(piece)
            return bytes(out)
        # Neither: the body runs to the end of the connection, which cannot be reused.
        hdrs["connection"] = "close"
        while True:
            piece = await c.reader.read(1 << 16)
            if not piece:
                return bytes(out)
            await put(piece)


class _NoAnswer(Exception):
    """The connection ended before a status line."""


class _StaleConnection(Exception):
    """A reused connection was found closed before any answer: safe to send again."""
