"""The candidate control-channel state machine and the exec files module on their own: every
frame a loader can send is accepted, everything else is a Violation with the right flag."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest

from sandbox.runner import files, flags, framing
from sandbox.runner.protocol import LOAD_BYTES, SYNTAX_BYTES, ControlChannel, Violation


def raw(text: str) -> bytes:
    body = text.encode("utf-8", "surrogatepass")
    return framing.HEADER.pack(len(body)) + body


def frame(obj: object) -> bytes:
    return framing.encode_frame(obj)


def test_function_load_goes_syntax_load_quiet_byte_by_byte():
    ch = ControlChannel("function")
    data = frame({"syntax_ok": True, "message": ""}) + frame({"runs": True, "message": "", "names": ["f", "a b", "g"]})
    for i in range(len(data)):  # frames split anywhere still parse
        ch.feed(data[i : i + 1])
    assert ch.settled and ch.state == "quiet"
    assert (ch.load.syntax_ok, ch.load.runs, ch.load.names) == (True, True, ["f", "g"])
    with pytest.raises(Violation) as e:
        ch.feed(b"\0")
    assert e.value.flag == flags.CONTROL_CHANNEL


def test_syntax_error_and_failed_top_level_settle():
    a = ControlChannel("function")
    a.feed(frame({"syntax_ok": False, "message": "SyntaxError: x"}))
    assert a.settled and a.load.syntax_ok is False
    b = ControlChannel("function")
    b.feed(frame({"syntax_ok": True, "message": ""}) + frame({"runs": False, "message": "ValueError: v"}))
    assert b.settled and b.load.runs is False and b.load.message == "ValueError: v"
    s = ControlChannel("script")
    s.feed(frame({"syntax_ok": True, "message": ""}))
    assert s.state == "closed"
    with pytest.raises(Violation) as e:
        s.feed(frame({"exit": 0}))  # the forged exit of finding 5
    assert e.value.flag == flags.CONTROL_CHANNEL


@pytest.mark.parametrize("body", [
    '{"runs":true,"message":"","names":[' + "9" * 5000 + "]}",  # over the int digit limit
    '{"runs":"yes","message":"","names":[]}',
    '{"runs":true,"message":5,"names":[]}',
    '{"runs":true,"message":"","names":{"f":1}}',
    '{"runs":true,"message":"","names":[1]}',
    '{"runs":true,"message":"","names":["' + "n" * 101 + '"]}',
    '{"runs":true,"message":"","names":[],"extra":1}',
    '{"runs":false,"message":"","names":["f"]}',
    '{"exit":"x"}',
    "[1,2,3]",
    "{{{",
    '"\\ud800" trailing',
    "\udcff",
])
def test_malformed_load_frames_are_violations(body):
    ch = ControlChannel("function")
    ch.feed(frame({"syntax_ok": True, "message": ""}))
    with pytest.raises(Violation) as e:
        ch.feed(raw(body))
    assert e.value.flag == flags.MALFORMED_FRAME
    assert not ch.buf  # nothing of it is kept


def test_size_bounds_per_state():
    ch = ControlChannel("function")
    with pytest.raises(Violation) as e:
        ch.feed(framing.HEADER.pack(SYNTAX_BYTES + 1))
    assert e.value.flag == flags.OVERSIZE_FRAME
    ch = ControlChannel("function")
    ch.feed(frame({"syntax_ok": True, "message": ""}))
    ch.feed(framing.HEADER.pack(LOAD_BYTES) + b"[" * 1000)  # within the bound: waits for the rest
    assert len(ch.buf) < LOAD_BYTES and not ch.settled
    with pytest.raises(Violation) as e:
        ControlChannel("script").feed(framing.HEADER.pack(1 << 30))
    assert e.value.flag == flags.OVERSIZE_FRAME


def test_framing_decode_errors_are_frame_errors():
    for body in (b"9" * 5000, b"\xff", b"[" * 100000, b"{} {}"):
        with pytest.raises(framing.MalformedFrame):
            framing.decode_body(body)
    with pytest.raises(framing.OversizeFrame):
        framing.FrameReader(limit=10).feed(framing.HEADER.pack(11))
    assert framing.encode_frame({"m": "a\ud800"}, errors="replace").endswith(b'"a?"}')


def test_async_frames_read_by_the_same_rules():
    """The server's side of a runner connection (asyncio streams) reads a frame as the runner's
    blocking and incremental readers do: the same header bound, the same body check."""

    async def read(data: bytes, limit: int = framing.MAX_FRAME) -> object:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await framing.read_frame(reader, limit)

    assert asyncio.run(read(frame({"event": "pong", "languages": ["python"]}))) == {"event": "pong",
                                                                                  "languages": ["python"]}
    with pytest.raises(framing.OversizeFrame):
        asyncio.run(read(framing.HEADER.pack(11) + b"x" * 11, limit=10))
    for body in ("{{{", "{} {}", " {}"):
        with pytest.raises(framing.MalformedFrame):
            asyncio.run(read(raw(body)))
    with pytest.raises(asyncio.IncompleteReadError):
        asyncio.run(read(framing.HEADER.pack(5) + b"{}"))


def test_files_write_names_each_bad_entry(tmp_path):
    scratch = str(tmp_path)
    good = base64.b64encode(b"x").decode()
    cases = {
        "content_b64 is not base64": [{"path": "a", "content_b64": "!!"}],
        "NUL": [{"path": "a\0b", "content_b64": good}],
        "UTF-8": [{"path": "a\ud800", "content_b64": good}],
        "longer than": [{"path": "n" * 300, "content_b64": good}],
        "leaves the scratch": [{"path": "../x", "content_b64": good}],
        "not a non-empty string": [{"path": 5, "content_b64": good}],
        "cannot write": [{"path": "a", "content_b64": good}, {"path": "a/b", "content_b64": good}],
    }
    for want, entries in cases.items():
        for name in os.listdir(scratch):
            os.remove(os.path.join(scratch, name))
        err = files.write_all(scratch, entries, None)
        assert want in err and err.startswith("files["), (want, err)
    assert files.write_all(scratch, [{"path": "d/e.txt", "content_b64": good}], None) == ""


def test_fetch_dedups_by_normalised_path_within_a_cap(tmp_path):
    scratch = str(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_bytes(b"f" * 100)
    (tmp_path / "g").write_bytes(b"g" * 100)
    os.symlink("/etc/passwd", tmp_path / "link")
    got, notes = files.fetch_all(scratch, ["f", "./f", "d/../f", "d//../f", "link", "g", "missing", "\0"], 150)
    assert list(got) == ["f"] and got["f"] == b"f" * 100
    assert any("'g'" in n and "cap" in n for n in notes) and any("link" in n for n in notes), notes
