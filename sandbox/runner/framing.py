"""Length-prefixed JSON frames over stream sockets (4-byte big-endian length): the one codec
every side speaks, blocking (the runner's processes), incremental (what an event loop or a
poll feeds) and asyncio streams (the server), and the one ping a runner answers."""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20
# made once: json.dumps (and JSONEncoder.encode) builds a new C encoder per call, half the
# cost of a small frame, and every job sends a dozen frames (more with calls) through each
# of three processes. No circular-reference markers: every frame is a tree we build.
_encoder_options = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _make_encode() -> Any:
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # no C accelerator: the library's own path
        return _encoder_options.encode
    o = _encoder_options
    chunks = c_make_encoder(None, o.default, json.encoder.encode_basestring, None, o.key_separator,
                            o.item_separator, False, False, True)
    join = "".join
    return lambda obj: join(chunks(obj, 0))


_encode = _make_encode()
_raw_decode = json.JSONDecoder().raw_decode


class FrameError(Exception):
    """The peer sent something that is not a frame we accept."""


class OversizeFrame(FrameError):
    """A frame's header announced more bytes than the reader accepts."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds {limit}")
        self.size = size
        self.limit = limit


class MalformedFrame(FrameError):
    """The bytes are not one JSON value in UTF-8 (or a bound of the decoder was hit, such as
    the 4300-digit limit on integers)."""


def body_size(header: bytes | bytearray | memoryview, limit: int) -> int:
    """The body length the header at the start of `header` announces: the one place a
    header is read, and a frame over `limit` refused before any of its body is."""
    (size,) = HEADER.unpack_from(header)
    if size > limit:
        raise OversizeFrame(size, limit)
    return size


def encode_frame(obj: Any, errors: str = "surrogatepass") -> bytes:
    """One frame. `errors="backslashreplace"` makes the body valid UTF-8 whatever strings it
    holds: a lone surrogate inside a JSON string becomes its `\\udXXX` escape, which the peer's
    JSON decoder reads back as the same character (and its models then escape for good)."""
    data = _encode(obj).encode("utf-8", errors)
    return HEADER.pack(len(data)) + data


def send_frame(sock: socket.socket, obj: Any, timeout: float | None = None, errors: str = "surrogatepass") -> None:
    """Send one frame; with a timeout a peer that stops reading cannot stall us."""
    data = encode_frame(obj, errors)
    if timeout is None:
        _blocking(sock)
        sock.sendall(data)
        return
    view = memoryview(data)
    if sock.gettimeout() == 0.0:
        # a non-blocking socket (one an event loop watches): a frame nearly always fits the
        # socket's buffer, so try it whole first, without the poll and the two mode switches
        # that a timeout costs
        try:
            view = view[sock.send(view) :]
        except BlockingIOError:
            pass
        if not view:
            return
    deadline = time.monotonic() + timeout
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("peer is not reading")
        sock.settimeout(left)
        sent = sock.send(view)
        view = view[sent:]


def recv_frame(sock: socket.socket, limit: int = MAX_FRAME) -> Any:
    """Blocking read of one frame; None on a clean EOF before a header."""
    _blocking(sock)
    header = _recv_exact(sock, HEADER.size)
    if header is None:
        return None
    body = _recv_exact(sock, body_size(header, limit))
    if body is None:
        raise FrameError("connection closed inside a frame")
    return decode_body(body)


_ANSWER_READ = 8192


def recv_answer(sock: socket.socket, limit: int = MAX_FRAME) -> Any:
    """One frame from a peer that only ever answers what it was just asked (a call to the
    candidate and its reply): one `recv` for header and body in the common case, not two.
    With nothing outstanding, bytes past the frame can only be a broken or hostile peer."""
    _blocking(sock)
    data = sock.recv(_ANSWER_READ)
    if not data:
        return None
    if len(data) < HEADER.size:
        data += _recv_rest(sock, HEADER.size - len(data))
    end = HEADER.size + body_size(data, limit)
    if len(data) < end:
        data += _recv_rest(sock, end - len(data))
    elif len(data) > end:
        raise MalformedFrame("bad frame: data after an answer")
    return decode_body(memoryview(data)[HEADER.size :])


def _recv_rest(sock: socket.socket, n: int) -> bytes:
    rest = _recv_exact(sock, n)
    if rest is None:
        raise FrameError("connection closed inside a frame")
    return rest


def _blocking(sock: socket.socket) -> None:
    # setblocking costs two fcntl calls even when nothing changes; most sockets here stay
    # blocking, and a frame is sent or read per call a test makes
    if sock.gettimeout() is not None:
        sock.setblocking(True)


def decode_body(body: bytes | memoryview) -> Any:
    """The JSON value of a frame's body; MalformedFrame for anything else. ValueError covers
    bad UTF-8, bad JSON and an integer over the interpreter's digit limit, which a peer can
    write as easily as any other number."""
    try:
        text = str(body, "utf-8", "surrogatepass")
        obj, end = _raw_decode(text)  # our frames carry no whitespace around the value
    except (ValueError, RecursionError, MemoryError) as exc:
        raise MalformedFrame(f"bad frame: {str(exc)[:200]}") from None
    if end != len(text):
        raise MalformedFrame("bad frame: data after the value")
    return obj


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


PARTIAL = object()  # FrameReader.take: the buffer holds no whole frame yet


class FrameReader:
    """Incremental decoder for non-blocking reads: feed bytes, take whole frames."""

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self.limit = limit
        self.buf = bytearray()

    def take(self, limit: int | None = None) -> Any:
        """The next whole frame in the buffer (its bytes gone from it), else PARTIAL; a reader
        whose bound changes from frame to frame passes it here."""
        buf = self.buf
        if len(buf) < HEADER.size:
            return PARTIAL
        end = HEADER.size + body_size(buf, self.limit if limit is None else limit)
        if len(buf) < end:
            return PARTIAL
        body = bytes(buf[HEADER.size : end])
        del buf[:end]
        return decode_body(body)

    def feed(self, data: bytes) -> list[Any]:
        self.buf += data
        frames = []
        while (frame := self.take()) is not PARTIAL:
            frames.append(frame)
        return frames


# asyncio streams: the server's side of a runner connection. asyncio is imported where it is
# used: the runner's own processes speak the blocking calls above and never load it.

async def read_frame(reader: Any, limit: int = MAX_FRAME) -> Any:
    """One frame from an asyncio.StreamReader (IncompleteReadError when the peer hangs up)."""
    size = body_size(await reader.readexactly(HEADER.size), limit)
    return decode_body(await reader.readexactly(size))


async def write_frame(writer: Any, obj: Any) -> None:
    """One frame to an asyncio.StreamWriter, waiting until the transport takes it."""
    writer.write(encode_frame(obj))
    await writer.drain()


PING = {"op": "ping"}


async def ping(reader: Any, writer: Any, timeout: float | None = None) -> Any:
    """A runner's answer to the one ping (a pong with its languages, or an infra_error
    when it refuses work), on an open connection; TimeoutError past `timeout`."""
    import asyncio

    await write_frame(writer, PING)
    if timeout is None:
        return await read_frame(reader)
    return await asyncio.wait_for(read_frame(reader), timeout)


async def ping_path(path: str, timeout: float) -> Any:
    """The one ping on a fresh connection to the runner socket at `path`, closed after."""
    import asyncio

    reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path, limit=MAX_FRAME), timeout)
    try:
        return await ping(reader, writer, timeout)
    finally:
        writer.close()
