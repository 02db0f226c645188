r"""Stdout comparison for stdio tests, done by the runner, never by the program.

The rule: line by line, ignoring trailing whitespace and trailing blank lines; the number of
lines must match, so a correct prefix does not pass. `StdoutMatcher` applies it to output as
it arrives, holding at most the line being read (bounded by the expected line's length), so a
16 MiB answer is never held whole.

With a tolerance, a line is split into tokens at ASCII blanks and compared token by token,
exact where the data is exact. The numeric token grammar is strict (ASCII only):

    integer   -?[0-9]+
    decimal   -?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,4})?   (with a '.' or an exponent)

No leading '+', no '_' separators, no hexadecimal, no "inf"/"nan"/"Infinity", no other
script's digits; a decimal token is at most `MAX_DECIMAL_CHARS` long (its exponent at most four
digits), so no value is huge or costly to read. A token outside the grammar is text and must
match character for character. Where the expected token is an integer, the answer must have
exactly its value (compared as decimal text, never through a float: `n*n + 1` is not `n*n`,
and `1e24` is not 1000000000000000000000001); `3.0` for `3` passes, `2.9999999` does not.
Where the expected token is a decimal, the answer (integer or decimal) passes within the
tolerance, absolute or relative to the expected value, computed with `Decimal` (`1` for `1.0`
passes; at tolerance 0 only the exact value does). Leading zeros and the sign of zero carry no
value: `007` is 7 and `-0` is 0.
"""

from __future__ import annotations

import codecs
import decimal
import re

LINE_SLACK = 1 << 16  # a line may run this much past its expected length (trailing blanks) before it fails
MAX_DECIMAL_CHARS = 1024  # a decimal token past this is text (a double printed in full is ~330 chars)

_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_BLANKS = re.compile(r"[ \t\r\f\v]+")
# exact for every in-grammar value's exponent (|e| <= 9999 plus 1024 digits); 60 digits for a
# difference or a bound, far finer than any tolerance; no trap: nothing here can raise
_CONTEXT = decimal.Context(prec=60, Emax=100_000, Emin=-100_000, traps=[])


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _integer_text(token: str) -> str:
    """An integer token's value as canonical text (no sign for zero, no leading zeros): exact
    at any length, with no int() (whose digit limit a long answer would hit)."""
    negative = token.startswith("-")
    digits = token.lstrip("-").lstrip("0") or "0"
    return "-" + digits if negative and digits != "0" else digits


def _decimal(token: str) -> decimal.Decimal | None:
    """A numeric token (of the module's grammar) as a Decimal; None for text."""
    if len(token) > MAX_DECIMAL_CHARS or not _DECIMAL.fullmatch(token):
        return None
    return decimal.Decimal(token)


def _tolerance(tol: float) -> decimal.Decimal:
    """The tolerance as written (repr: 1e-06, not the binary float's 9.99999999999999954e-07)."""
    return decimal.Decimal(repr(float(tol)))


def _token_equal(actual: str, expected: str, tol: decimal.Decimal) -> bool:
    if actual == expected:
        return True
    if _INTEGER.fullmatch(expected):
        if _INTEGER.fullmatch(actual):
            return _integer_text(actual) == _integer_text(expected)
        a = _decimal(actual)  # 3.0 or 3e0 for 3: the same value exactly, never "close to"
        return a is not None and a == decimal.Decimal(expected)
    e = _decimal(expected)
    if e is None:
        return False  # text: character for character
    a = _decimal(actual)
    if a is None:
        return False
    if a == e or tol.is_infinite():
        return True
    diff = _CONTEXT.abs(_CONTEXT.subtract(a, e))
    return diff <= max(tol, _CONTEXT.multiply(tol, _CONTEXT.abs(e)))


def _line_equal(actual: str, expected: str, tol: decimal.Decimal | None) -> bool:
    if tol is None:
        return actual == expected
    ta, te = _BLANKS.split(actual.strip(" \t\r\f\v")), _BLANKS.split(expected.strip(" \t\r\f\v"))
    return len(ta) == len(te) and all(_token_equal(x, y, tol) for x, y in zip(ta, te))


class StdoutMatcher:
    """The comparison, fed in pieces (bytes as read from the pipe, decoded as UTF-8 with
    replacement, exactly as decoding the whole output would). `finish()` gives the verdict;
    `difference` then says where it went wrong."""

    def __init__(self, expected: str, float_tolerance: float | None = None, bounded: bool = True) -> None:
        self.expected = _lines(expected)
        self.tol = None if float_tolerance is None else _tolerance(float_tolerance)
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
