"""Generated (output, expected) pairs for the comparison modes' agreement with their peers
(tests/sandbox/test_compare_modes.py, bench/compare_agreement.py): an expected answer, then an
output that is it, a near miss, or a known trap (trailing blanks, blank lines, CRLF, `-0`,
values at the 1e-4/1e-5/1e-6/1e-9 boundaries, NaN, inf, case, Unicode, empty output, leading
zeros, exponents, huge integers, reordered lines and tokens). Deterministic for a seed."""

from __future__ import annotations

import random

WORDS = ["yes", "YES", "No", "no", "abc", "Hello", "world", "impossible", "-1", "x", "A", "é", "ß", "İ", "ǅ", "Ω",
         "naïve", "日本", "😀", "nan", "NaN", "inf", "-inf", "Infinity", "none", "True", "e", "E5", "1e", "0x1A", "١٢",
         "²", "+", "-", ".", "1_000", "½", "0x1A.0", "0x1p-2", "\ufffd"]
BLANKS = [" ", "  ", "\t", "\r", "\v", "\f", "\u00a0", "\u3000", "\u2028", "\x85", "\x1c", "\u200b"]


def _int(r: random.Random) -> str:
    k = r.random()
    if k < 0.4:
        return str(r.randint(-20, 20))
    if k < 0.6:
        return str(r.randint(-10**9, 10**9))
    if k < 0.7:
        return str(r.choice([2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**63 - 1, 2**63, -2**63, -2**63 - 1, 10**18]))
    if k < 0.8:
        return str(r.randint(10**18, 10**25) * r.choice([1, -1]))
    return str(r.randint(0, 10**6))


def _float(r: random.Random) -> str:
    k = r.random()
    v = r.choice([0.0, 1.0, -1.0, 0.5, 1e-5, 1e-9, 123.456, 1e6, 1e-300, 1e300, 3.14159265358979]) if k < 0.3 else \
        r.uniform(-1000, 1000) * 10 ** r.randint(-12, 12)
    fmt = r.choice(["%.1f", "%.3f", "%.6f", "%.9f", "%.12f", "%g", "%e", "%.17g", "%r"])
    return repr(v) if fmt == "%r" else fmt % v


def _token(r: random.Random) -> str:
    k = r.random()
    if k < 0.35:
        return _int(r)
    if k < 0.7:
        return _float(r)
    return r.choice(WORDS)


def expected_of(r: random.Random) -> str:
    """An expected answer: lines of tokens, sometimes one token, YES/NO, or empty."""
    k = r.random()
    if k < 0.08:
        return r.choice(["YES", "NO", "Yes", "no"]) + r.choice(["", "\n"])
    if k < 0.13:
        return r.choice(["", "\n", " ", "0", "0\n"])
    if k < 0.3:
        return _token(r) + r.choice(["", "\n", "\n\n", " \n"])
    lines = []
    for _ in range(r.randint(1, 5)):
        lines.append(" ".join(_token(r) for _ in range(r.randint(1, 4))))
    text = "\n".join(lines)
    return text + r.choice(["\n", "", "\n\n", "\r\n"])


def _perturb(tok: str, r: random.Random) -> str:
    """A number near the token: at a tolerance's boundary, another spelling, a sign of zero."""
    try:
        v = float(tok)
    except ValueError:
        return tok + r.choice(["0", "1", ".0", "a"])
    if v != v or v in (float("inf"), float("-inf")):
        return r.choice(["nan", "inf", "-inf", "1e309", "NaN", "0"])
    eps = r.choice([1e-4, 1e-5, 1e-6, 1e-9, 1e-15, 1e-8])
    mult = r.choice([0.5, 0.99, 0.999999, 1.0, 1.000001, 1.01, 2.0])
    k = r.random()
    if k < 0.3:
        n = v + eps * mult * r.choice([1, -1])
    elif k < 0.6:
        n = v * (1 + eps * mult * r.choice([1, -1]))
    elif k < 0.7:
        return r.choice(["-0", "0", "-0.0", "0.0", "+0", "00", "-00", "0e0", ".0", "0."])
    elif k < 0.8:
        return r.choice([f"{v:.20f}", f"{v:e}", f"{v:E}", f"{v:.3e}", "+" + tok, "0" + tok.lstrip("-"), tok + ".",
                         tok + "e0", tok + "E+00", f"{v:.0f}", str(int(v)) if abs(v) < 1e18 else tok])
    elif k < 0.9:
        return str(int(v) + r.choice([1, -1])) if abs(v) < 1e30 else tok
    else:
        return r.choice(["1e400", "-1e400", "1e-400", "4.9e-324", "1.7976931348623157e308", "nan", "inf", "infinity",
                         "-nan", "nan(1)", "1e", "1e+", ".", "-", "--1", "+-1", "1e5.5", "0x10", "1_0", "١",
                         "0x1p3", "0X.8", "0x1.8p1", "-0x10", "0x", "0x1p", "nan(abc)", "INFINITY", "1e0000000005",
                         "1e1234567890", "1e-1234567890", "+.5e-", "5.e", "00.e5", "\x001"])
    return r.choice([f"{n:.17g}", f"{n:.6f}", f"{n:.9f}", f"{n:.12g}", repr(n), f"{n:e}"])


def mutate(expected: str, r: random.Random) -> str:
    """An output near `expected`."""
    k = r.random()
    if k < 0.12:
        return expected
    lines = expected.split("\n")
    if k < 0.22:  # blanks at line ends, CRLF, blank lines
        op = r.choice(["trail", "crlf", "blank_end", "blank_mid", "lead", "strip", "no_nl", "cr_only", "tabs"])
        if op == "trail":
            return "\n".join(ln + r.choice(BLANKS[:6]) for ln in lines)
        if op == "crlf":
            return expected.replace("\n", "\r\n")
        if op == "blank_end":
            return expected + r.choice(["\n", "\n\n", "\n \n", " ", "\r\n"])
        if op == "blank_mid":
            i = r.randint(0, len(lines))
            return "\n".join(lines[:i] + [r.choice(["", " ", "\t"])] + lines[i:])
        if op == "lead":
            return r.choice(BLANKS[:6] + ["\n"]) + expected
        if op == "strip":
            return expected.strip()
        if op == "no_nl":
            return expected.rstrip("\n")
        if op == "cr_only":
            return expected.replace("\n", "\r")
        return expected.replace(" ", "\t")
    if k < 0.32:  # case
        return r.choice([expected.upper(), expected.lower(), expected.swapcase(), expected.title()])
    if k < 0.45 or k >= 0.9:  # one number or token changed
        toks = expected.split(" ")
        i = r.randrange(len(toks))
        head, sep, tail = toks[i].partition("\n")
        toks[i] = _perturb(head, r) + sep + tail if head else toks[i]
        out = " ".join(toks)
        if r.random() < 0.3:  # and another
            return mutate(out, r)
        return out
    if k < 0.55:  # unicode blanks, odd characters
        b = r.choice(BLANKS)
        return r.choice([expected.replace(" ", b), expected + b, b + expected, expected.replace("\n", b)])
    if k < 0.63:  # reorder
        toks = expected.split()
        r.shuffle(toks)
        if r.random() < 0.5:
            ls = [ln for ln in lines]
            r.shuffle(ls)
            return "\n".join(ls)
        return " ".join(toks)
    if k < 0.7:  # tokens across lines
        return r.choice([expected.replace(" ", "\n"), expected.replace("\n", " "), expected.replace(" ", "  ")])
    if k < 0.77:  # drop or add
        toks = expected.split(" ")
        if r.random() < 0.5 and len(toks) > 1:
            del toks[r.randrange(len(toks))]
        else:
            toks.insert(r.randint(0, len(toks)), _token(r))
        return " ".join(toks)
    if k < 0.82:  # empty, blank, duplicated
        return r.choice(["", "\n", " ", "\r\n", "\t\n", expected + expected, lines[0]])
    # an unrelated answer of the same shape
    return expected_of(r)


def pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n (output, expected) pairs."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        e = expected_of(r)
        out.append((mutate(e, r), e))
    return out
