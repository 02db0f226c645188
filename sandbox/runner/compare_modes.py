r"""Named comparison modes for stdio tests: each reproduces one data set's own tester, so a
program scores here what it scores there (the reward agrees with the data).

`MODES` is the table, one entry per mode, each naming the peer's file and function. Every
rule is re-derived from that source and checked against the peer's own code, run unchanged,
on generated (output, expected) pairs (bench/compare_agreement.py, tests/sandbox/
test_compare_modes.py; docs/JUDGING.md). A mode is never looser than its peer: where the
peer rejects (NaN, a value it cannot parse, a token past its length limit) so does the mode.

`matcher(mode, expected, float_tolerance)` gives the object the runner feeds stdout to as it
arrives (`feed(bytes)`, `finish() -> bool`, `difference`, `restart()`): `lines` is
compare.StdoutMatcher, unchanged (it alone holds at most a line); `tokens` and `codecontests`
hold at most the token being read; the others need the whole output (line counts, sets,
sorting) and keep it, bounded by the job's output limit, which the runner enforces first.

The output is decoded as UTF-8 with `surrogateescape` (an invalid byte stays distinct from any
character), so two different byte strings never compare equal where the peer's bytes differ.
"""

from __future__ import annotations

import codecs
import decimal
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from .compare import LINE_SLACK, StdoutMatcher, _token_equal, _tolerance

MAX_KEPT = 64 << 20  # a mode that needs the whole output keeps at most this much (the largest output limit)


_PY_ASCII_SPACE = " \t\n\r\v\f\x1c\x1d\x1e\x1f"  # what str.split() splits ASCII text at


def split_tokens(text: str, pattern: re.Pattern[str], separators: str) -> list[str]:
    """pattern.findall(text) (tokens between `separators`), by str.split() where that is the
    same (ASCII text holding no other blank str.split() knows): ten times faster."""
    if text.isascii() and not any(c in text for c in _PY_ASCII_SPACE if c not in separators):
        return text.split()
    return pattern.findall(text)


class Matcher:
    """What the runner feeds a test's stdout to (compare.StdoutMatcher has the same shape)."""

    difference = ""

    def feed(self, data: bytes) -> None:
        raise NotImplementedError

    def finish(self) -> bool:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError


class WholeMatcher(Matcher):
    """Keeps the output (bytes), judges it at the end with `judge(actual, expected)`, which
    returns "" when it passes, else why not."""

    def __init__(self, expected: str, judge: Callable[[str, str], str]) -> None:
        self.expected, self.judge = expected, judge
        self.restart()

    def restart(self) -> None:
        self._data = bytearray()
        self._over = False
        self.difference = ""

    def feed(self, data: bytes) -> None:
        if len(self._data) + len(data) > MAX_KEPT:
            self._over = True
            return
        self._data += data

    def finish(self) -> bool:
        if self._over:
            self.difference = f"output past {MAX_KEPT} bytes"
            return False
        actual = bytes(self._data).decode("utf-8", "surrogateescape")
        try:
            self.difference = self.judge(actual, self.expected)
        except (ValueError, ArithmeticError, MemoryError, RecursionError) as e:  # the peer raised: not accepted
            self.difference = f"comparison failed: {type(e).__name__}"
        return not self.difference


class TokenMatcher(Matcher):
    """Whitespace tokens compared pair by pair as they arrive (only the token being read is
    held). `pair(actual, expected)` says whether a pair matches; with `exact_fallback` a
    pair that does not match still passes when every token is equal as text (CodeContests'
    `output_parts == expected_parts` before its pairwise rule); `self_fails(token)` says
    whether a token fails `pair` against itself (CodeContests: a NaN or an infinity).
    Each piece's tokens are compared as a list against the expected slice (C speed); `pair`
    runs only where they differ, and not at all once the verdict is decided."""

    def __init__(self, expected: str, separators: str, pair: Callable[[str, str], bool],
                 fold: Callable[[str], str] = lambda s: s, exact_fallback: bool = False,
                 self_fails: Callable[[str], bool] | None = None) -> None:
        self._tok = re.compile("[^" + re.escape(separators) + "]+")
        self._seps = separators
        self.pair, self.fold, self.exact_fallback, self.self_fails = pair, fold, exact_fallback, self_fails
        self.expected = split_tokens(fold(expected), self._tok, separators)
        self.restart()

    def restart(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._partial = ""
        self.n = 0
        self.all_equal = self.all_match = True
        self.difference = ""

    def feed(self, data: bytes) -> None:
        self._text(self._decoder.decode(data), final=False)

    def _text(self, text: str, final: bool) -> None:
        text = self._partial + text
        if not final:
            cut = max(text.rfind(c) for c in self._seps) + 1  # the last token may go on in the next piece
            text, self._partial = text[:cut], text[cut:]
            if len(self._partial) > LINE_SLACK and not self.all_equal and not self.all_match:
                self._partial = self._partial[:1]  # decided: only the count matters now
        else:
            self._partial = ""
        if text:
            self._tokens(split_tokens(self.fold(text), self._tok, self._seps))

    def _tokens(self, toks: list[str]) -> None:
        i = self.n
        self.n += len(toks)
        if not (self.all_equal or self.all_match):
            return  # decided
        exp = self.expected[i:i + len(toks)]
        if len(exp) < len(toks):
            self.all_equal = self.all_match = False
            return
        if toks == exp:
            if self.all_match and self.self_fails is not None and any(map(self.self_fails, toks)):
                self.all_match = False
            return
        self.all_equal = False
        if not self.all_match:
            return
        if all(map(self.pair, toks, exp)):
            return
        self.all_match = False
        k = next(k for k, (a, e) in enumerate(zip(toks, exp, strict=True)) if not self.pair(a, e))
        self.difference = f"token {i + k + 1}: expected {exp[k][:60]!r}, got {toks[k][:60]!r}"

    def finish(self) -> bool:
        self._text(self._decoder.decode(b"", final=True), final=True)
        if self.n != len(self.expected):
            self.difference = f"expected {len(self.expected)} tokens, got {self.n}"
            return False
        ok = self.all_match or (self.exact_fallback and self.all_equal)
        if ok:
            self.difference = ""
        elif not self.difference:
            self.difference = "a token differs"
        return ok


# ---- tokens: our own token rule without the lines


def _tokens_matcher(expected: str, tol: float | None) -> Matcher:
    t = None if tol is None else _tolerance(tol)
    return TokenMatcher(expected, " \t\n\r\f\v", lambda a, e: a == e if t is None else _token_equal(a, e, t))


# ---- codecontests: execution/tester_sandboxer.cc OutputsMatch (absl SimpleAtoi/SimpleAtod)

_ABSL_SPACE = " \t\n\v\f\r"  # absl::ascii_isspace
_ABSL_DOUBLE = re.compile(r"-?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)",
                          re.IGNORECASE | re.ASCII)
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


_ABSL_HEX = re.compile(r"-?0[xX](?P<int>[0-9a-fA-F]*)(?:\.(?P<frac>[0-9a-fA-F]*))?(?:[pP][+-]?[0-9]+)?")
_ABSL_DECIMAL = re.compile(r"-?(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?:[eE][+-]?[0-9]+)?")
_PLAIN_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]*)?")
_ABSL_DIGIT_LIMIT = 50_000_000  # charconv_parse.cc kDecimalDigitLimit (hexadecimal: a quarter)


def _absl_pathological(int_part: str, frac: str, limit: int) -> bool:
    """ParseFloat refuses a run of this many mantissa digits (or zeros after the point)."""
    significant = int_part.lstrip("0")
    if len(significant) >= limit:
        return True
    if not significant:
        zeros = len(frac) - len(frac.lstrip("0"))
        return zeros >= limit or len(frac) - zeros >= limit
    return len(frac) >= limit


def absl_simple_atod(s: str) -> float | None:
    """absl::SimpleAtod (abseil 20211102, numbers.cc): ASCII blanks stripped, one '+' skipped
    (not "+-"), then absl::from_chars in general format over the whole rest: decimal with an
    optional exponent, inf/infinity and nan(...) in any case, and (charconv.cc FromCharsImpl)
    a "0x" hexadecimal float with an optional 'p' exponent; overflow is +/-inf, underflow 0,
    both correctly rounded as float() and float.fromhex() are."""
    if len(s) < 300 and _PLAIN_DECIMAL.fullmatch(s):
        return float(s)  # the common case, as below
    s = s.strip(_ABSL_SPACE)
    if s.startswith("+"):
        s = s[1:]
        if s.startswith("-"):
            return None
    neg = s.startswith("-")
    low = s.lower()
    if low.lstrip("-").startswith(("inf", "nan")):
        if not _ABSL_DOUBLE.fullmatch(s):
            return None
        if "nan" in low:
            return -math.nan if neg else math.nan
        return -math.inf if neg else math.inf
    m = _ABSL_HEX.fullmatch(s)
    if m is not None and (m["int"] or m["frac"]):
        if _absl_pathological(m["int"], m["frac"] or "", _ABSL_DIGIT_LIMIT // 4):
            return None
        try:
            return float.fromhex(s)
        except OverflowError:
            return -math.inf if neg else math.inf
    m = _ABSL_DECIMAL.fullmatch(s)
    if m is None or not (m["int"] or m["frac"]):
        return None
    if _absl_pathological(m["int"], m["frac"] or "", _ABSL_DIGIT_LIMIT):
        return None
    return float(s)  # correctly rounded, as from_chars is


def codecontests_values_match(a: str, b: str) -> bool:
    """tester_sandboxer.cc ValuesMatch: a token either side that SimpleAtoi and SimpleAtod
    both refuse compares as text; else std::abs(ad - bd) < 1e-5 (strict). Every token
    SimpleAtoi reads SimpleAtod reads too, so the int branch never decides: ints compare
    within 1e-5 as doubles (and NaN or inf never match: their difference is NaN)."""
    ad = absl_simple_atod(a)
    if ad is None:
        return a == b
    bd = absl_simple_atod(b)
    if bd is None:
        return a == b
    return abs(ad - bd) < 1e-5


def _codecontests_matcher(expected: str, tol: float | None) -> Matcher:
    # absl::ByAnyChar(" \n\t\r\v"): no '\f'; AsciiStrToLower: A-Z only
    return TokenMatcher(expected, " \n\t\r\v", codecontests_values_match, fold=lambda s: s.translate(_LOWER),
                        exact_fallback=True, self_fails=_cc_self_fails)


_MAYBE_NONFINITE = re.compile(r"[inpe]|[0-9]{300}")  # inf, nan, an exponent, or digits enough to overflow


def _cc_self_fails(tok: str) -> bool:
    """ValuesMatch(t, t) is false where t reads as NaN or an infinity (their difference is NaN)."""
    if _MAYBE_NONFINITE.search(tok) is None and len(tok) < 300:
        return False
    v = absl_simple_atod(tok)
    return v is not None and not math.isfinite(v)


# ---- sandboxfusion: sandbox/utils/testing.py check_stdio_test_case (lower_cmp=True)


def _sf_is_float(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def sandboxfusion(actual: str, expected: str) -> str:
    """SandboxFusion's compare: whole output stripped, split at '\\n', lines lower-cased and
    stripped; a line that differs passes when both parse as float() within a relative 1e-5
    (|a-b| / max(|b|, 1e-10) < 1e-5)."""
    rl_all = actual.strip().split("\n")
    el_all = expected.strip().split("\n")
    if len(rl_all) - len(el_all) == 1 and rl_all[-1] == "":
        rl_all = rl_all[:-1]
    if len(el_all) - len(rl_all) == 1 and el_all[-1] == "":
        el_all = el_all[:-1]
    if len(rl_all) != len(el_all):
        return f"expected {len(el_all)} lines, got {len(rl_all)}"
    for i, (rl, el) in enumerate(zip(rl_all, el_all, strict=True)):
        rl, el = rl.lower(), el.lower()
        if rl.strip() != el.strip():
            if _sf_is_float(el) and _sf_is_float(rl):
                a, b = float(rl), float(el)
                if abs(a - b) / max(abs(b), 1e-10) < 1e-5:
                    continue
            return f"line {i + 1}: expected {el.strip()[:60]!r}, got {rl.strip()[:60]!r}"
    return ""


# ---- livecodebench: lcb_runner/evaluation/testing_util.py grade_stdio


def _lcb_lines(val: str) -> list[str]:
    return [line.strip() for line in val.strip().split("\n")]


def _lcb_decimals(line: str) -> list[decimal.Decimal] | None:
    try:
        return [decimal.Decimal(e) for e in line.split()]
    except Exception:  # the peer's bare except: any failure is "not decimals"
        return None


def livecodebench(actual: str, expected: str) -> str:
    """LiveCodeBench's grade_stdio: stripped output and expected, split at '\\n', each line
    stripped; equal lines pass, else both lines' whitespace tokens as Decimal must be equal
    (so 1.0 = 1, but 1.000001 != 1; NaN never equals)."""
    p, g = _lcb_lines(actual), _lcb_lines(expected)
    if len(p) != len(g):
        return f"expected {len(g)} lines, got {len(p)}"
    for i, (pl, gl) in enumerate(zip(p, g, strict=True)):
        if pl == gl:
            continue
        dp = _lcb_decimals(pl)
        dg = _lcb_decimals(gl) if dp is not None else None
        if dp is None or dg is None or dp != dg:
            return f"line {i + 1}: expected {gl[:60]!r}, got {pl[:60]!r}"
    return ""


# ---- apps / prime_code: APPS eval/testing_util.py and verl's prime_code testing_util.py run_test


def _np_allclose(xs: list[float], ys: list[float]) -> bool:
    """numpy.allclose(xs, ys) for equal-length float lists (rtol 1e-5, atol 1e-8, NaN unequal):
    |x-y| <= atol + rtol*|y| where y is finite, or x == y."""
    return all((math.isfinite(y) and abs(x - y) <= 1e-08 + 1e-05 * abs(y)) or x == y for x, y in zip(xs, ys, strict=True))


def _floats(lines: list[str]) -> list[float] | None:
    try:
        return [float(e) for e in lines]
    except (ValueError, OverflowError):
        return None


def _apps_common(actual: str, expected: str) -> tuple[bool, list[str], list[str]]:
    """The cascade's first steps, common to APPS and prime_code: (passed, output lines
    without empty ones, expected lines without empty ones, stripped)."""
    output = actual.splitlines()
    if "\n".join(output).strip() == expected.strip():  # custom_compare_
        return True, [], []
    if "\n".join(o.strip() for o in output).strip() == expected.strip():
        return True, [], []
    if output == [expected]:  # check1
        return True, [], []
    gt = [x.strip() for x in expected.split("\n") if len(x)]
    if output == gt:  # check2
        return True, [], []
    output = [o for o in output if len(o)]
    if output == gt:  # check3
        return True, [], []
    return False, output, gt


def apps(actual: str, expected: str) -> str:
    """APPS's run_test (standard input): the cascade of joined/stripped text, exact lines,
    lines without blanks, numpy.allclose over one number per line, then the lines as sets of
    tokens (order of lines and of tokens ignored), then those sets with numbers rounded to 3
    places. Loose, as APPS is: use it only to agree with APPS-scored data."""
    ok, output, gt = _apps_common(actual, expected)
    if ok:
        return ""
    of, gf = _floats(output), _floats(gt)
    if of is not None and gf is not None and len(of) == len(gf) and _np_allclose(of, gf):
        return ""
    out_sets = [set(s) for s in (o.split() for o in output) if len(s)]
    gt_sets = [set(x.split()) for x in gt]
    if out_sets == gt_sets:  # check4 compares a list of strings with sets: only [] == []
        return ""
    if {frozenset(s) for s in out_sets} == {frozenset(s) for s in gt_sets}:
        return ""
    try:
        if ({frozenset(round(float(t), 3) for t in s) for s in out_sets}
                == {frozenset(round(float(t), 3) for t in s) for s in gt_sets}):
            return ""
    except (ValueError, OverflowError):
        pass
    return "wrong output (APPS cascade)"


def _prime_int(v: str) -> bool:
    return v.isdigit()  # combined_int_check on a str: str.isdigit()


def prime_code(actual: str, expected: str) -> str:
    """verl's prime_code run_test (standard input): APPS's cascade up to numpy.allclose, the
    float step skipped where every line pair is str.isdigit() (integers stay exact), and no
    set or rounding steps."""
    ok, output, gt = _apps_common(actual, expected)
    if ok:
        return ""
    if len(output) == len(gt) and all(_prime_int(a) and _prime_int(b) for a, b in zip(output, gt, strict=True)):
        return "wrong output (prime_code cascade)"
    of, gf = _floats(output), _floats(gt)
    if of is not None and gf is not None and len(of) == len(gf) and _np_allclose(of, gf):
        return ""
    return "wrong output (prime_code cascade)"


def taco(actual: str, expected: str) -> str:
    """TACO's compare_std_results on the program's stdout as subprocess's text mode gives it
    (UTF-8, strict; CRLF and CR become LF): stripped text equal, else APPS's later steps on a
    string rather than lines (float() over its characters, the set of all its tokens against
    the expected lines' token sets, so one-character tokens in any order and lines pass)."""
    try:
        actual.encode("utf-8")
    except UnicodeEncodeError:
        return "stdout is not UTF-8 (TACO's text-mode run raises)"
    out = actual.replace("\r\n", "\n").replace("\r", "\n")
    if out.strip() == expected.strip():
        return ""
    gt = [x.strip() for x in expected.split("\n") if len(x)]
    of, gf = _floats(list(out)), _floats(gt)
    if of is not None and gf is not None and len(of) == len(gf) and _np_allclose(of, gf):
        return ""
    toks = set(filter(len, out.split()))
    gt_sets = [set(x.split()) for x in gt]
    if {frozenset(t) for t in toks} == {frozenset(s) for s in gt_sets}:
        return ""
    try:
        if ({frozenset(round(float(c), 3) for c in t) for t in toks}
                == {frozenset(round(float(t), 3) for t in s) for s in gt_sets}):
            return ""
    except (ValueError, OverflowError):
        pass
    return "wrong output (TACO cascade)"


# ---- testlib:<name>: testlib.h's InStream as the standard checkers (checkers/*.cpp) use it

TESTLIB_MAX_TOKEN = 32 * 1024 * 1024  # InStream::maxTokenLength, bytes
_TL_BLANKS = " \t\n\r"  # isBlanks: LF, CR, SPACE, TAB
_C_SPACE = re.compile(r"[^ \t\n\v\f\r]+")  # std::stringstream >> string, "C" locale isspace
_TL_DOUBLE_CHARS = re.compile(r"[0-9.eE+-]*")
# glibc's scanf %lf: an exponent mark and its sign are taken even with no digits after ("1e+" is 1)
_SCANF_DOUBLE = re.compile(r"(?P<m>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE][+-]?(?P<e>[0-9]*))?")
_HUGE_INT = re.compile(r"0|-?[1-9][0-9]*")
_TL_TOKEN = re.compile(r"[^ \t\n\r]+")
_TL_SKIP = re.compile(r"[ \t\n\r]*")
_CR_PAIR = re.compile(r"\r(.)", re.DOTALL)
_EOF = ""


class _Quit(Exception):
    """testlib's quit: the checker's verdict (ok, wa, pe, fail)."""

    def __init__(self, result: str, why: str) -> None:
        super().__init__(why)
        self.result, self.why = result, why


class _InStream:
    """testlib's InStream over a decoded file (non-strict, as a checker's ouf and ans are);
    an error on the answer stream is FAIL (the task's fault), on the output PE."""

    def __init__(self, text: str, answer: bool) -> None:
        self.s, self.pos, self.answer = text, 0, answer

    def quit(self, result: str, why: str) -> _Quit:
        return _Quit("fail" if self.answer and result in ("pe", "wa") else result, why)

    def cur(self) -> str:
        return self.s[self.pos] if self.pos < len(self.s) else _EOF

    def next(self) -> str:
        if self.pos >= len(self.s):
            return _EOF
        self.pos += 1
        return self.s[self.pos - 1]

    def eof(self) -> bool:
        return self.pos >= len(self.s)

    def seek_eof(self) -> bool:
        m = _TL_SKIP.match(self.s, self.pos)
        assert m is not None
        self.pos = m.end()
        return self.pos >= len(self.s)

    def read_word(self) -> str:
        self.seek_eof()
        if self.eof():
            raise self.quit("pe", "unexpected end of file - token expected")
        m = _TL_TOKEN.match(self.s, self.pos)
        assert m is not None
        tok = m.group()
        if len(tok) > TESTLIB_MAX_TOKEN // 4 and len(tok.encode("utf-8", "surrogateescape")) > TESTLIB_MAX_TOKEN:
            raise self.quit("pe", "token too long")
        self.pos = m.end()
        return tok

    def read_long(self) -> int:
        if self.seek_eof():
            raise self.quit("pe", "unexpected end of file - int64 expected")
        tok = self.read_word()
        v = testlib_string_to_long(tok)
        if v is None:
            raise self.quit("pe", f"expected integer, but {tok[:60]!r} found")
        return v

    def read_double(self) -> float:
        if self.seek_eof():
            raise self.quit("pe", "unexpected end of file - double expected")
        tok = self.read_word()
        v = testlib_string_to_double(tok)
        if v is None:
            raise self.quit("pe", f"expected double, but {tok[:60]!r} found")
        return v

    def read_string(self) -> str:
        """readStringTo then eoln(): up to LF or EOF. Scanned left to right, a CR followed by
        LF ends the line (not part of it); any other CR is dropped and the char after it kept
        as it is (so "a\\r\\r\\n" is "a\\r"); a CR last in the file keeps the byte 0xFF."""
        s, pos = self.s, self.pos
        nl = s.find("\n", pos)
        end = len(s) if nl < 0 else nl
        seg = s[pos:end]
        self.pos = end if nl < 0 else nl + 1
        if "\r" not in seg:
            return seg
        run = len(seg) - len(seg.rstrip("\r"))  # an odd run of CRs at the end: its last is unpaired
        line = _CR_PAIR.sub(r"\1", seg[:-1] if run % 2 else seg)
        return line + "\udcff" if run % 2 and nl < 0 else line


def testlib_string_to_long(tok: str) -> int | None:
    """stringToLongLong: at most 20 chars, an optional '-', digits, no leading zero (nor "-0"), int64."""
    n = len(tok)
    if n == 0 or n > 20:
        return None
    minus = n > 1 and tok[0] == "-"
    digits = tok[1:] if minus else tok
    if not digits.isascii() or not digits.isdigit():
        return None
    v = int(tok)
    if not -(1 << 63) <= v < (1 << 63):
        return None
    zeroes = len(digits) - len(digits.lstrip("0"))
    if (zeroes > 0 and (v != 0 or minus)) or zeroes > 1:
        return None
    return v


def testlib_string_to_double(tok: str) -> float | None:
    """stringToDouble: only [0-9.eE+-], at least one digit, at most two '-' and two '+', one
    '.', one 'e'; then sscanf("%lf%s") (glibc's) must take the whole token (no inf, nan or
    hex: no letters but e; "1e" and "1e+" read as 1); overflow is inf, underflow 0."""
    if "\0" in tok or not _TL_DOUBLE_CHARS.fullmatch(tok):
        return None
    if (not any(c.isdigit() for c in tok) or tok.count("-") > 2 or tok.count("+") > 2 or tok.count(".") > 1
            or tok.count("e") + tok.count("E") > 1):
        return None
    m = _SCANF_DOUBLE.fullmatch(tok)
    if m is None:
        return None
    return float(tok if m["e"] else m["m"])  # correctly rounded, as glibc's is


def testlib_double_compare(expected: float, result: float, eps: float) -> bool:
    """testlib.h doubleCompare: eps + 1e-15; NaN only with NaN; 'infinite' is |x| > 1e300;
    absolute error, else result within expected*(1 -+ eps)."""
    eps += 1e-15
    if math.isnan(expected):
        return math.isnan(result)
    if expected > 1e300 or expected < -1e300:
        return (result > 0 if expected > 0 else result < 0) and (result > 1e300 or result < -1e300)
    if math.isnan(result) or result > 1e300 or result < -1e300:
        return False
    if abs(result - expected) <= eps:
        return True
    lo, hi = expected * (1.0 - eps), expected * (1.0 + eps)
    return min(lo, hi) <= result <= max(lo, hi)


def _dirt(ouf: _InStream) -> None:
    """quit(_ok) checks that the output has nothing left but blanks."""
    if not ouf.seek_eof():
        raise _Quit("pe", "extra information in the output file")


def _tl_wcmp(ans: _InStream, ouf: _InStream) -> None:
    n = 0
    while not ans.seek_eof() and not ouf.seek_eof():
        n += 1
        j, p = ans.read_word(), ouf.read_word()
        if j != p:
            raise _Quit("wa", f"token {n}: expected {j[:60]!r}, found {p[:60]!r}")
    if not (ans.seek_eof() and ouf.seek_eof()):
        raise _Quit("wa", "extra tokens" if ans.seek_eof() else "unexpected end of output")


def _tl_lines(ans: _InStream, ouf: _InStream, same: Callable[[str, str], bool]) -> None:
    n = 0
    while not ans.eof():
        j = ans.read_string()
        if not j and ans.eof():
            break
        p = ouf.read_string()
        n += 1
        if not same(j, p):
            raise _Quit("wa", f"line {n}: expected {j[:60]!r}, found {p[:60]!r}")


def _tl_lcmp(ans: _InStream, ouf: _InStream) -> None:
    _tl_lines(ans, ouf, lambda j, p: _C_SPACE.findall(j) == _C_SPACE.findall(p))


def _tl_fcmp(ans: _InStream, ouf: _InStream) -> None:
    _tl_lines(ans, ouf, lambda j, p: j == p)


def _tl_ncmp(ans: _InStream, ouf: _InStream) -> None:
    n = 0
    while not ans.seek_eof() and not ouf.seek_eof():
        n += 1
        j, p = ans.read_long(), ouf.read_long()
        if j != p:
            raise _Quit("wa", f"number {n}: expected {j}, found {p}")
    extra_ans = extra_ouf = 0
    while not ans.seek_eof():
        ans.read_long()
        extra_ans += 1
    while not ouf.seek_eof():
        ouf.read_long()
        extra_ouf += 1
    if extra_ans or extra_ouf:
        raise _Quit("wa", f"expected {n + extra_ans} numbers, found {n + extra_ouf}")


def _tl_uncmp(ans: _InStream, ouf: _InStream) -> None:
    ja, pa = [], []
    while not ans.seek_eof():
        ja.append(ans.read_long())
    while not ouf.seek_eof():
        pa.append(ouf.read_long())
    if len(ja) != len(pa):
        raise _Quit("wa", f"expected {len(ja)} elements, found {len(pa)}")
    if sorted(ja) != sorted(pa):
        raise _Quit("wa", "different as unordered sequences")


def _upper(s: str) -> str:
    return s.translate(str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def _tl_yesno(ans: _InStream, ouf: _InStream) -> None:
    ja, pa = _upper(ans.read_word()), _upper(ouf.read_word())
    if ja not in ("YES", "NO"):
        raise _Quit("fail", "YES or NO expected in the answer")
    if pa not in ("YES", "NO"):
        raise _Quit("pe", f"YES or NO expected, found {pa[:60]!r}")
    if ja != pa:
        raise _Quit("wa", f"expected {ja}, found {pa}")


def _tl_rcmp(eps: float) -> Callable[[_InStream, _InStream], None]:
    def check(ans: _InStream, ouf: _InStream) -> None:
        n = 0
        while not ans.seek_eof():
            n += 1
            j, p = ans.read_double(), ouf.read_double()
            if not testlib_double_compare(j, p, eps):
                raise _Quit("wa", f"number {n}: expected {j!r}, found {p!r}")
    return check


def _tl_hcmp(ans: _InStream, ouf: _InStream) -> None:
    ja, pa = ans.read_word(), ouf.read_word()
    if not _HUGE_INT.fullmatch(ja):
        raise _Quit("fail", f"{ja[:60]!r} is not a valid integer")
    if not ans.seek_eof():
        raise _Quit("fail", "expected exactly one token in the answer file")
    if not _HUGE_INT.fullmatch(pa):
        raise _Quit("pe", f"{pa[:60]!r} is not a valid integer")
    if ja != pa:
        raise _Quit("wa", f"expected {ja[:60]!r}, found {pa[:60]!r}")


TESTLIB_CHECKERS: dict[str, tuple[Callable[[_InStream, _InStream], None], str]] = {
    "wcmp": (_tl_wcmp, "tokens (blanks: space, tab, CR, LF) equal as text"),
    "lcmp": (_tl_lcmp, "line by line (readString), each line's tokens equal; nothing but blanks after"),
    "fcmp": (_tl_fcmp, "line by line (readString) equal as text; nothing but blanks after"),
    "ncmp": (_tl_ncmp, "signed int64 tokens (no leading zeros, no -0) equal, in order, same count"),
    "uncmp": (_tl_uncmp, "signed int64 tokens equal as multisets"),
    "yesno": (_tl_yesno, "one token, YES or NO in any case, equal to the answer's first; nothing after"),
    "rcmp4": (_tl_rcmp(1e-4), "doubles (testlib's strict grammar) within abs or rel 1e-4 (doubleCompare)"),
    "rcmp6": (_tl_rcmp(1e-6), "doubles within abs or rel 1e-6 (doubleCompare)"),
    "rcmp9": (_tl_rcmp(1e-9), "doubles within abs or rel 1e-9 (doubleCompare)"),
    "hcmp": (_tl_hcmp, "one huge integer (0|-?[1-9][0-9]*) equal as text; nothing after"),
}


def testlib_verdict(name: str, actual: str, expected: str) -> tuple[str, str]:
    """The checker's verdict (ok, wa, pe, fail) and why, as checkers/<name>.cpp would exit."""
    check = TESTLIB_CHECKERS[name][0]
    ouf, ans = _InStream(actual, answer=False), _InStream(expected, answer=True)
    try:
        check(ans, ouf)
        _dirt(ouf)
    except _Quit as q:
        return q.result, q.why
    return "ok", ""


_TL_LONG = r"(?:0|-?[1-9][0-9]{0,18})"
_TL_LONGS = re.compile(f"{_TL_LONG}(?:\n{_TL_LONG})*")
_TL_DBL = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]*)?"
_TL_DOUBLES = re.compile(f"{_TL_DBL}(?:\n{_TL_DBL})*")
_C_BLANKS = re.compile(r"[ \t\v\f]+")
_TL_BLANK_REST = re.compile(r"[ \t\n]*")


def _longs(toks: list[str]) -> list[int] | None:
    """Every token a canonical int64 (stringToLongLong), as ints; None where one is not."""
    if toks and not _TL_LONGS.fullmatch("\n".join(toks)):
        return None
    values = list(map(int, toks))
    if any(v >= 1 << 63 or v < -(1 << 63) for v in values):
        return None
    return values


def _doubles(toks: list[str]) -> list[float] | None:
    """Every token a double as testlib reads it (stringToDouble with glibc's sscanf)."""
    if toks and not _TL_DOUBLES.fullmatch("\n".join(toks)):
        return None
    out = []
    for t in toks:
        try:
            out.append(float(t))
        except ValueError:  # "1e", "1e+": glibc reads the mantissa
            out.append(testlib_string_to_double(t) or 0.0)
    return out


def _tl_lines_fast(actual: str, expected: str) -> tuple[list[str], list[str], str] | None:
    """The lines lcmp and fcmp read (answer, output, the output's rest), where no CR makes
    readString's scan matter; None otherwise."""
    if "\r" in actual or "\r" in expected:
        return None
    ans = expected.split("\n")
    if expected.endswith("\n"):
        ans.pop()  # the last LF ends the file
    if ans and ans[-1] == "":
        ans.pop()  # an empty line read at the end: the loop stops without comparing it
    out = actual.split("\n")
    got = out[: len(ans)] + [""] * (len(ans) - len(out))
    rest = "\n".join(out[len(ans):]) if len(ans) < len(out) else ""
    return ans, got, rest


def testlib_accepts(name: str, actual: str, expected: str) -> bool | None:
    """Whether checkers/<name>.cpp accepts, decided over whole token or line lists (C-speed
    list and regex work, no per-character scan); None where only the exact reading
    (testlib_verdict) can say: a token past the length limit, a CR in a line checker's input."""
    if name in ("lcmp", "fcmp"):
        lines = _tl_lines_fast(actual, expected)
        if lines is None:
            return None
        ans, got, rest = lines
        if not _TL_BLANK_REST.fullmatch(rest):
            return False
        if name == "fcmp":
            return ans == got
        return ([_C_BLANKS.sub(" ", x).strip(" ") for x in ans] == [_C_BLANKS.sub(" ", x).strip(" ") for x in got])
    ta, to = split_tokens(expected, _TL_TOKEN, _TL_BLANKS), split_tokens(actual, _TL_TOKEN, _TL_BLANKS)
    if max(map(len, ta), default=0) > TESTLIB_MAX_TOKEN // 4 or max(map(len, to), default=0) > TESTLIB_MAX_TOKEN // 4:
        return None
    if name == "wcmp":
        return ta == to
    if name == "ncmp":
        return ta == to and _longs(ta) is not None
    if name == "uncmp":
        ja, pa = _longs(ta), _longs(to)
        return ja is not None and pa is not None and sorted(ja) == sorted(pa)
    if name == "yesno":
        return bool(ta) and len(to) == 1 and _upper(ta[0]) in ("YES", "NO") and _upper(to[0]) == _upper(ta[0])
    if name == "hcmp":
        return len(ta) == 1 and len(to) == 1 and _HUGE_INT.fullmatch(ta[0]) is not None and ta[0] == to[0]
    eps = {"rcmp4": 1e-4, "rcmp6": 1e-6, "rcmp9": 1e-9}[name]
    if len(ta) != len(to):
        return False
    ja = _doubles(ta)
    if ja is None:
        return False
    if ta == to:
        return True  # doubleCompare(x, x) holds for every value testlib reads (no NaN)
    pa = _doubles(to)
    return pa is not None and all(map(testlib_double_compare, ja, pa, [eps] * len(ja)))


def _testlib_judge(name: str) -> Callable[[str, str], str]:
    def judge(actual: str, expected: str) -> str:
        fast = testlib_accepts(name, actual, expected)
        if fast is True:
            return ""
        if fast is False:
            return f"testlib {name}: not accepted (WA, PE, or an answer the checker refuses)"
        result, why = testlib_verdict(name, actual, expected)
        if result == "ok":
            return ""
        if result == "fail":
            return f"testlib {name}: the expected answer is not valid for this checker ({why})"
        return f"testlib {name}: {result.upper()} {why}"
    return judge


# ---- the table


@dataclass(frozen=True)
class Mode:
    """One comparison mode: the peer it reproduces and how its matcher is made."""

    name: str
    peer: str  # the file and function reproduced
    rule: str
    make: Callable[[str, float | None], Matcher | StdoutMatcher]


def _whole(judge: Callable[[str, str], str]) -> Callable[[str, float | None], Matcher]:
    return lambda expected, tol: WholeMatcher(expected, judge)


MODES: dict[str, Mode] = {m.name: m for m in [
    Mode("lines", "ours: sandbox/runner/compare.py StdoutMatcher",
         "lines after rstrip, trailing blank lines ignored, same count; float_tolerance per token (the default)",
         lambda expected, tol: StdoutMatcher(expected, tol)),
    Mode("tokens", "ours: sandbox/runner/compare.py _token_equal",
         "whitespace tokens in order, line breaks ignored; exact, or lines' token rule with float_tolerance",
         _tokens_matcher),
    Mode("codecontests", "google-deepmind/code_contests execution/tester_sandboxer.cc OutputsMatch",
         "tokens split at space/\\n/\\t/\\r/\\v, ASCII lower-cased; equal lists, or pairwise: text exact, "
         "numbers (absl SimpleAtod) within absolute 1e-5", _codecontests_matcher),
    Mode("sandboxfusion", "bytedance/SandboxFusion sandbox/utils/testing.py check_stdio_test_case",
         "output stripped, split at \\n, same count; lines lower-cased and stripped, else float() within "
         "relative 1e-5", _whole(sandboxfusion)),
    Mode("livecodebench", "LiveCodeBench lcb_runner/evaluation/testing_util.py grade_stdio",
         "output stripped, split at \\n, lines stripped, same count; equal, or the line's tokens equal as Decimal",
         _whole(livecodebench)),
    Mode("apps", "hendrycks/apps eval/testing_util.py run_test (standard input)",
         "APPS's cascade: stripped text, exact lines, numpy.allclose per line, lines as token sets, rounded to 3",
         _whole(apps)),
    Mode("taco", "FlagOpen/TACO metrics/testing_util.py compare_std_results (stdout from subprocess, text mode)",
         "stripped text; then APPS's later steps applied to the whole stdout string (its characters, its token set)",
         _whole(taco)),
    Mode("prime_code", "verl verl/utils/reward_score/prime_code/testing_util.py run_test (standard input)",
         "APPS's cascade to numpy.allclose (skipped where all lines are digits); no set steps",
         _whole(prime_code)),
    *[Mode(f"testlib:{name}", f"MikeMirzayanov/testlib checkers/{name}.cpp", rule,
           _whole(_testlib_judge(name))) for name, (_, rule) in TESTLIB_CHECKERS.items()],
]}


def known(mode: str) -> bool:
    return mode in MODES


def matcher(mode: str, expected: str, float_tolerance: float | None = None) -> Matcher | StdoutMatcher:
    """The matcher for `mode` (KeyError for an unknown one: the server validates names first)."""
    return MODES[mode].make(expected, float_tolerance)


def judge(mode: str, actual: str, expected: str, float_tolerance: float | None = None) -> bool:
    """The whole comparison at once (tests, the agreement bench): `actual` fed as UTF-8."""
    m = matcher(mode, expected, float_tolerance)
    m.feed(actual.encode("utf-8", "surrogateescape"))
    return m.finish()

