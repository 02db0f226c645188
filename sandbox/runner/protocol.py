"""What a candidate may write on its control channel, and when: one small state machine per candidate.

The supervisor reads a candidate's channel only while the candidate loads; its frames then
say whether the program compiled and whether its top level ran. A script run closes the
channel before the program's own code runs, so after the syntax frame nothing may come; a
function run hands the channel to the verdict process after the load frame, so nothing may
come before that either. Every byte is checked here against the state it arrives in (which
frame, which fields of which types, how large); anything else is a `Violation` that names the
flag it earns. Nothing a candidate writes is kept beyond the frame the state allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import flags, framing

SYNTAX_BYTES = 4096  # {"syntax_ok": bool, "message": str <= 500 chars}
LOAD_BYTES = 2 << 20  # {"runs": bool, "message": str, "names": [<= 2000 str of <= 100 chars]}
MESSAGE_CHARS = 500
MAX_NAMES = 2000
NAME_CHARS = 100


class Violation(Exception):
    """The candidate broke the protocol; `flag` is what it earns (sandbox.runner.flags)."""

    def __init__(self, flag: str, why: str) -> None:
        super().__init__(why)
        self.flag = flag
        self.why = why


@dataclass
class Load:
    """What the candidate's loader said, once checked."""

    syntax_ok: bool | None = None
    runs: bool | None = None
    message: str = ""
    names: list[str] = field(default_factory=list)
    replies: list[dict] = field(default_factory=list)  # a session's answers, taken by its supervisor


def _message(frame: dict) -> str:
    msg = frame["message"]
    if type(msg) is not str or len(msg) > MESSAGE_CHARS:
        raise Violation(flags.MALFORMED_FRAME, "message is not a short string")
    return msg


def _check_syntax(frame: object, load: Load) -> None:
    if type(frame) is not dict or frame.keys() != {"syntax_ok", "message"} or type(frame["syntax_ok"]) is not bool:
        raise Violation(flags.MALFORMED_FRAME, "expected the syntax frame")
    load.syntax_ok = frame["syntax_ok"]
    load.message = _message(frame)


def _check_load(frame: object, load: Load) -> None:
    if type(frame) is not dict or type(frame.get("runs")) is not bool:
        raise Violation(flags.MALFORMED_FRAME, "expected the load frame")
    keys = {"runs", "message", "names"} if frame["runs"] else {"runs", "message"}
    if frame.keys() != keys:
        raise Violation(flags.MALFORMED_FRAME, "load frame with other fields")
    message = _message(frame)
    names: list[str] = []
    if frame["runs"]:
        raw = frame["names"]
        if type(raw) is not list or len(raw) > MAX_NAMES:
            raise Violation(flags.MALFORMED_FRAME, "names is not a list of at most 2000")
        for n in raw:
            if type(n) is not str or len(n) > NAME_CHARS:
                raise Violation(flags.MALFORMED_FRAME, "a name that is not a short string")
            if n.isidentifier():
                names.append(n)
    load.runs, load.message, load.names = frame["runs"], message, names


REPLY_BYTES = 2 << 20  # a session's answer to one cell (sandbox.runner.repl caps its parts below this)
_REPLY_STATUS = ("ok", "error", "interrupted")
ERROR_CAPS = {"type": 200, "message": 8 << 10, "traceback": 64 << 10}
RESULT_CHARS = 256 << 10


def _check_ready(frame: object, load: Load) -> None:
    if frame != {"ready": True}:
        raise Violation(flags.MALFORMED_FRAME, "expected the session's ready frame")
    load.syntax_ok = True


def _check_reply(frame: object, load: Load) -> None:
    """A session's answer to one cell: its own word, shown to its client; checked for shape
    and size only (a session is never graded by what it says)."""
    if type(frame) is not dict or frame.keys() != {"status", "result", "error"} or frame["status"] not in _REPLY_STATUS:
        raise Violation(flags.MALFORMED_FRAME, "expected a cell's reply")
    result, error = frame["result"], frame["error"]
    if result is not None and (type(result) is not str or len(result) > RESULT_CHARS):
        raise Violation(flags.MALFORMED_FRAME, "a cell's result is not a string of bounded size")
    if error is not None:
        if type(error) is not dict or error.keys() != ERROR_CAPS.keys():
            raise Violation(flags.MALFORMED_FRAME, "a cell's error is not {type, message, traceback}")
        for k, most in ERROR_CAPS.items():
            if type(error[k]) is not str or len(error[k]) > most:
                raise Violation(flags.MALFORMED_FRAME, f"a cell's error {k} is not a string of bounded size")
    load.replies.append(frame)


# state -> (largest frame it accepts, its check); the next state follows from the mode
_STATES = {"syntax": (SYNTAX_BYTES, _check_syntax), "load": (LOAD_BYTES, _check_load),
           "ready": (SYNTAX_BYTES, _check_ready), "reply": (REPLY_BYTES, _check_reply)}


class ControlChannel:
    """The checked reading of one candidate's control channel.

    script:   syntax -> closed              (the candidate closes its end after the syntax frame)
    function: syntax -> load -> quiet       (then the channel is the verdict process's)
    session:  ready -> reply -> reply ...   (one reply per cell; the supervisor takes them)
    A syntax error ends either at `closed`/`quiet`. In `closed` and `quiet` no byte may come.
    """

    def __init__(self, mode: str) -> None:
        if mode not in ("script", "function", "session"):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.state = "ready" if mode == "session" else "syntax"
        self.load = Load()
        self.reader = framing.FrameReader()

    @property
    def buf(self) -> bytearray:
        """The bytes of a frame not yet whole."""
        return self.reader.buf

    @property
    def settled(self) -> bool:
        """No frame is expected any more."""
        return self.state in ("closed", "quiet")

    def feed(self, data: bytes) -> bool:
        """Take bytes read from the channel; True when a frame moved the state on. Raises
        Violation; keeps at most one allowed frame's bytes."""
        moved = False
        buf = self.reader.buf
        buf += data
        while buf:
            if self.settled:
                buf.clear()
                raise Violation(flags.CONTROL_CHANNEL, f"wrote to its control channel in state {self.state}")
            limit, check = _STATES[self.state]
            try:
                frame = self.reader.take(limit)
            except framing.OversizeFrame as exc:
                buf.clear()
                raise Violation(flags.OVERSIZE_FRAME, f"a frame of {exc.size} bytes where at most {limit} fit") from None
            except framing.FrameError as exc:
                buf.clear()
                raise Violation(flags.MALFORMED_FRAME, str(exc)) from None
            if frame is framing.PARTIAL:
                break
            try:
                check(frame, self.load)
            except Violation:
                buf.clear()
                raise
            self._advance()
            moved = True
        return moved

    def _advance(self) -> None:
        if self.mode == "session":
            self.state = "reply"
        elif self.state == "syntax" and self.load.syntax_ok and self.mode == "function":
            self.state = "load"
        else:
            self.state = "closed" if self.mode == "script" else "quiet"
