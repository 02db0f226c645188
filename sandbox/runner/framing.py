"""Length-prefixed JSON frames over stream sockets (4-byte big-endian length)."""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20


class FrameError(Exception):
    """The peer sent something that is not a frame we accept."""


def encode_frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(data)) + data


def send_frame(sock: socket.socket, obj: Any, timeout: float | None = None) -> None:
    """Send one frame; with a timeout a peer that stops reading cannot stall us."""
    data = encode_frame(obj)
    if timeout is None:
        sock.setblocking(True)
        sock.sendall(data)
        return
    deadline = time.monotonic() + timeout
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("peer is not reading")
        sock.settimeout(left)
        sent = sock.send(view)
        view = view[sent:]


def recv_frame(sock: socket.socket, limit: int = MAX_FRAME) -> Any:
    """Blocking read of one frame; None on a clean EOF before a header."""
    sock.setblocking(True)
    header = _recv_exact(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds {limit}")
    body = _recv_exact(sock, size)
    if body is None:
        raise FrameError("connection closed inside a frame")
    return _decode(body)


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FrameError(f"bad frame: {exc}") from None


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    got = 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise FrameError("connection closed inside a frame")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Incremental decoder for non-blocking reads: feed bytes, take whole frames."""

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self.limit = limit
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buf += data
        frames = []
        while len(self.buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self.buf)
            if size > self.limit:
                raise FrameError(f"frame of {size} bytes exceeds {self.limit}")
            if len(self.buf) < HEADER.size + size:
                break
            body = bytes(self.buf[HEADER.size : HEADER.size + size])
            del self.buf[: HEADER.size + size]
            frames.append(_decode(body))
        return frames
