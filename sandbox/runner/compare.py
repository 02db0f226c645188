"""Stdout comparison for stdio tests, done by the runner, never by the program.

The rule: line by line, ignoring trailing whitespace and trailing blank lines; the number of
lines must match, so a correct prefix does not pass; with a tolerance, numeric tokens compare
within it. `StdoutMatcher` applies it to output as it arrives, holding at most the line being
read (bounded by the expected line's length), so a 16 MiB answer is never held whole.
"""

from __future__ import annotations

import codecs
import math

LINE_SLACK = 1 << 16  # a line may run this much past its expected length (trailing blanks) before it fails


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _token_equal(a: str, b: str, tol: float) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return abs(x - y) <= max(tol, tol * abs(y))


def _line_equal(actual: str, expected: str, tol: float | None) -> bool:
    if tol is None:
        return actual == expected
    ta, te = actual.split(), expected.split()
    return len(ta) == len(te) and all(_token_equal(x, y, tol) for x, y in zip(ta, te))


class StdoutMatcher:
    """The comparison, fed in pieces (bytes as read from the pipe, decoded as UTF-8 with
    replacement, exactly as decoding the whole output would). `finish()` gives the verdict;
    `difference` then says where it went wrong."""

    def __init__(self, expected: str, float_tolerance: float | None = None, bounded: bool = True) -> None:
        self.expected = _lines(expected)
        self.tol = float_tolerance
        self.bounded = bounded
        self.restart()

    def restart(self) -> None:
        """Forget what was fed: the run is done again (languages/harness.py, a test moved to a
        process of its own)."""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial: list[str] = []  # the line being read (while it may still match)
        self._partial_len = 0
        self._partial_blank = True
        self.lines = 0  # complete lines seen
        self.last_nonblank = -1
        self.ok = True
        self.difference = ""
        self._blank_miss: int | None = None  # a blank line where one was expected: trailing, or not?

    def feed(self, data: bytes) -> None:
        self.feed_text(self._decoder.decode(data))

    def feed_text(self, text: str) -> None:
        if not text:
            return
        pieces = text.split("\n")
        for piece in pieces[:-1]:
            self._add(piece)
            self._end_line()
        self._add(pieces[-1])

    def finish(self) -> bool:
        self.feed_text(self._decoder.decode(b"", final=True))
        self._end_line()
        n = self.last_nonblank + 1
        if self.ok and n != len(self.expected):
            self.ok = False
        if not self.ok and not self.difference:
            self.difference = f"expected {len(self.expected)} lines, got {n}"
        return self.ok

    def _add(self, piece: str) -> None:
        if not piece:
            return
        if self._partial_blank and piece.strip():
            self._partial_blank = False
        if not self._wants_text():
            return
        self._partial.append(piece)
        self._partial_len += len(piece)
        i = self.lines
        if self.bounded and self._partial_len > len(self.expected[i]) + LINE_SLACK:
            got = "".join(self._partial)[:60]
            self._fail(f"line {i + 1}: expected {self.expected[i][:60]!r}, got {got!r}")

    def _wants_text(self) -> bool:
        """Whether the line's text still matters (else only whether it is blank)."""
        return self.ok and self.lines < len(self.expected)

    def _end_line(self) -> None:
        i = self.lines
        if not self._partial_blank:
            self.last_nonblank = i
            if self._blank_miss is not None and not self.difference:  # it was not trailing
                j = self._blank_miss
                self.difference = f"line {j + 1}: expected {self.expected[j][:60]!r}, got ''"
        if self._wants_text():
            line = "".join(self._partial).rstrip()
            if not line and self.expected[i]:
                self.ok, self._blank_miss = False, i  # the message waits: a count, or this line
            elif not _line_equal(line, self.expected[i], self.tol):
                self._fail(f"line {i + 1}: expected {self.expected[i][:60]!r}, got {line[:60]!r}")
        elif self.ok and not self._partial_blank:
            self.ok = False  # more lines than expected: the message counts them at the end
        self.lines += 1
        self._partial.clear()
        self._partial_len = 0
        self._partial_blank = True

    def _fail(self, why: str) -> None:
        if self.ok:
            self.ok, self.difference = False, why
        self._partial.clear()


def stdout_matches(actual: str, expected: str, float_tolerance: float | None = None) -> bool:
    """Line by line, ignoring trailing whitespace and trailing blank lines; the number of
    lines must match, so a correct prefix does not pass."""
    m = StdoutMatcher(expected, float_tolerance, bounded=False)
    m.feed_text(actual)
    return m.finish()
