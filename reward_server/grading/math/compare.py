"""Equivalence of parsed answers, and the whole check (extract -> parse -> compare).

Runs inside the worker process only (it may call SymPy on parsed objects, never on text).
"""

from __future__ import annotations

import dataclasses
import random
import re
import time

import sympy as sp
from sympy.core.function import AppliedUndef

from .extract import extract, last_number
from .numwords import replace_number_words
from .parse import (
    GLUED_UNITS,
    PM,
    Logic,
    Q,
    Ratio,
    Rel,
    Seq,
    SetV,
    SSet,
    Text,
    TooLarge,
    _plain,
    as_set,
    name_like,
    parse,
    rel_to_set,
    rel_var,
)

_CMD_NAMES = (
    "frac|dfrac|tfrac|cfrac|sqrt|boxed|left|right|begin|end|text|pi|cdot|times|infty|le|ge|leq|geq|neq|"
    "mathrm|mathbf|textbf|sin|cos|tan|log|ln|pm|cup|cap|in|approx|circ|quad|qquad|mbox|dots|ldots|cdots"
)
_DOUBLE_ESC = re.compile(r"(?<!\\)\\\\(?=(?:" + _CMD_NAMES + r")\b)")


_CODE_RE = re.compile(
    r"__[A-Za-z]\w{0,40}?__|\b(?:lambda|import|exec|eval|compile|open|getattr|globals|locals|system|subprocess|range)\s*[(:]"
    r"|\bimport\s+\w|\bfor\s+\w+\s+in\b"
)


# 4\,096, 1\;000\;000, 12 345 with thin/no-break spaces: one number (the separators dropped)
_THIN_GROUPS = re.compile(r"(?<![\d.])\d{1,3}(?:(?:\\[,;: ]|\\thinspace\s*|[\u2009\u202f\u00a0])\d{3})+(?!\d)")
_LITERAL_NL = re.compile(
    r"\\n(?!(?:e|eq|u|um|ot|otin|abla|exists|i|ewline|mid|parallel|leq|geq|subseteq|atural|ormalsize)(?![A-Za-z]))"
)
_ALL_REALS = re.compile(r"(?:thesetof)?(?:all|every)?(?:the)?real(?:numbers?|s)|(?:all|every)(?:the)?reals?|allrealvalues(?:ofx)?")
_GLUED_UNIT_RE = re.compile(r"\d(?:" + "|".join(sorted(GLUED_UNITS)) + r")(?![A-Za-z])")
_REPEAT_RE = re.compile(r"(\d*)\.(\d*)\\(?:overline|bar)\s*\{(\d{1,12})\}")


def _repeating(m: re.Match) -> str:
    """0.1\\overline{6} -> \\frac{1}{6} (exact)."""
    whole, fixed, rep = m.group(1) or "0", m.group(2), m.group(3)
    num = int(whole + fixed + rep) - int(whole + fixed)
    den = (10 ** len(rep) - 1) * 10 ** len(fixed)
    return f"\\frac{{{num}}}{{{den}}}"


class Opts:
    def __init__(self, d: dict):
        self.rel_tol = float(d.get("rel_tol", 1e-6))
        self.percent = d.get("percent", "flexible")
        self.units = d.get("units", "strip")
        self.fallback = d.get("fallback", "last_number")
        self.strip_think = d.get("strip_think", True)
        self.max_answer_chars = int(d.get("max_answer_chars", 2000))
        self.max_completion_chars = int(d.get("max_completion_chars", 200_000))
        self.list_order = d.get("list_order", "reference")
        self.interval_form = d.get("interval_form", "union")
        self.exact_confirm = d.get("exact_confirm", True)
        self.rounded_reference = d.get("rounded_reference", "exact")


# --------------------------------------------------------------------------- normalisation


def normalize(s: str) -> str:
    if _DOUBLE_ESC.search(s):
        s = _DOUBLE_ESC.sub(r"\\", s)
        s = s.replace("\\\\\\\\", "\\\\")
    if "\\n" in s and "\n" not in s:
        s = _LITERAL_NL.sub(" ", s)  # literal "\n" escapes, not \\neq, \\num, \\nu
    s = re.sub(r"(\d)\s*\{\s*,\s*\}\s*(?=\d{3})", r"\1", s)
    s = re.sub(r"(\d),\\!\s*(?=\d{3})", r"\1", s)
    s = _THIN_GROUPS.sub(lambda m: re.sub(r"\D", "", m.group(0)), s)
    s = s.replace("\\!", "").replace("\\$", " ").replace("\\displaystyle", " ")
    s = _REPEAT_RE.sub(_repeating, s)
    s = s.strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"(?:\\\\|\\)\s*$", "", s).strip()  # "185\"
    s = re.sub(r"[.。]+$", "", s).strip()
    s = _GLUED_CONNECTIVE.sub(r" \1 ", s)  # x=1orx=-1, W(x)=1orW(x)=-1
    s = _LETTER_UNION.sub(r" \\cup ", s)  # (-oo, -2) U (2, oo)
    s = _ISO_INTERVAL.sub(_iso_interval, s)  # ]-oo, -2[ (ISO 31-11 / French notation)
    s = re.sub(r"\\text\s*\{\s*[.,;]?\s*\}\s*$", "", s).strip()  # a trailing \text{.}
    return s


# an interval written as in ISO 31-11, a bracket turned outward at each open end ("]a, b[" open,
# "[a, b[" right-open); an ordinary "[a, b]" matches too and is left as it is
_ISO_INTERVAL = re.compile(r"(?<![0-9)}])([\[\]])([^\[\](),]{1,80}),([^\[\](),]{1,80})([\[\]])")


def _iso_interval(m: re.Match) -> str:
    o, a, b, c = m.groups()
    if o == "[" and c == "]":
        return m.group(0)
    return ("(" if o == "]" else "[") + a + "," + b + (")" if c == "[" else "]")


# a capital U between two intervals is a union (plain-text answers)
_LETTER_UNION = re.compile(r"(?<=[)\]])\s{0,3}(?:\\(?:text|mathrm)\s*\{\s*U\s*\}|U)\s{0,3}(?=\\left\s*[(\[]|[(\[])")


# "or"/"and" glued between a finished value (a digit, a closing bracket) and the next relation on
# a name ("x=", "W(x)=", "x>", "x\\le"): written without spaces, the connective merges into one word
_GLUED_CONNECTIVE = re.compile(
    r"(?<=[0-9)\]}])(or|and)(?=[A-Za-z][A-Za-z0-9_]{0,10}(?:\([^()=]{0,20}\))?\s{0,3}(?:[=<>]|\\(?:le|ge|ne|lt|gt)))")


def alternatives(s: str) -> list[str]:
    """Readings of a number written with separators: '1,000' thousands vs European '1,5'."""
    s = normalize(s)
    out = [s]
    core = s.strip()
    if re.fullmatch(r"[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d+)?", core):
        out.insert(0, core.replace(",", ""))
    elif re.fullmatch(r"[+-]?\d{1,3}( \d{3})+(\.\d+)?", core):
        out.insert(0, core.replace(" ", ""))
    elif re.fullmatch(r"[+-]?\d+,\d+", core):
        out.insert(0, core.replace(",", "."))
    elif re.fullmatch(r"[+-]?\d{1,3}(\.\d{3})+,\d+", core):
        out.insert(0, core.replace(".", "").replace(",", "."))
    if _ALL_REALS.fullmatch(text_key(s).lower()):
        out.append("\\mathbb{R}")  # "all real numbers"
    if len(s) <= 400 and (digits := replace_number_words(s)):
        out.append(digits)  # "twelve", "two hundred and five", "three fifths"
    return out


def text_key(s: str) -> str:
    s = re.sub(r"\\(?:text|mathrm|textbf|mathbf|mbox|textnormal|operatorname)\s*\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\(left|right)\b", "", s)
    s = re.sub(r"[\s$]", "", s)
    return s


# --------------------------------------------------------------------------- scalars


def _has_bad(e) -> bool:
    return any(x in (sp.oo, -sp.oo, sp.zoo, sp.nan) for x in sp.preorder_traversal(e)) if isinstance(e, sp.Basic) else True


def _num(e, subs=None):
    v = e.evalf(30, subs=subs) if subs else e.evalf(30)
    if not v.is_number:
        return None
    try:
        c = complex(v)
    except (TypeError, ValueError):
        return None
    if c != c or abs(c) == float("inf"):
        return None
    return c


def _close(a: complex, b: complex, tol: float) -> bool:
    return abs(a - b) <= tol * max(abs(a), abs(b)) or abs(a - b) <= 1e-300


MAX_CONFIRM_DIGITS = 5000


def _exact_confirm(a, b, mag: float) -> bool:
    """Two exact constants agree to 30 digits: are they still equal at a precision scaled to the
    size of the integers written in them? (2^(2^-1000) agrees with 1 to 300 digits.)"""
    if mag < 1e-20:
        return True  # values near zero: the 30-digit verdict stands
    digits = 0
    for e in (a, b):
        for r in e.atoms(sp.Rational):
            digits = max(digits, int(max(abs(int(r.p)), int(r.q)).bit_length() * 0.30103) + 1)
    dps = min(MAX_CONFIRM_DIGITS, 40 + 2 * digits)
    try:
        va, vb = a.evalf(dps), b.evalf(dps)
        ra, ia = va.as_real_imag()
        rb, ib = vb.as_real_imag()
        d = max(abs(sp.Float(ra - rb, dps)), abs(sp.Float(ia - ib, dps)))
        return bool(d <= sp.Float(mag, dps) * sp.Float(10, dps) ** (15 - dps))
    except Exception:  # noqa: BLE001  (the soft timeout is a BaseException and passes through)
        return True  # cannot evaluate further: the 30-digit verdict stands


# Probe buckets for one variable: identities that hold only for positive values (|x| = x,
# sqrt((x+1)^2) = x+1, floor(x) = x, ln(x^2) = 2 ln x read backwards) fail at negative, large or
# non-integer points. Bucket k of symbol j at try k is _BUCKETS[(k + j*k) % 8], so one variable
# meets every bucket in eight tries and several variables meet mixed signs.
_BUCKETS = ((-2.5, -0.2), (0.2, 2.5), (8.0, 60.0), (-60.0, -8.0), (-0.9, 0.9), (2.5, 8.0), (-8.0, -2.5), (60.0, 400.0))
MAX_PROBES = 16  # tries per comparison (points outside the reference's domain are skipped)
WANT_PROBES = 7  # agreeing points that settle it
MIN_PROBES = 3  # fewer points in the domain: fall back to all finite points, then to simplify


def _probe_points(syms: list, seed: int):
    """Deterministic probe points (30-digit floats, never integers) over the buckets above."""
    rnd = random.Random(seed)
    for k in range(MAX_PROBES):
        yield {s: sp.Float(rnd.uniform(*_BUCKETS[(k + j * k) % len(_BUCKETS)]), 30) for j, s in enumerate(syms)}


def _branches(e) -> list[tuple[str, object]]:
    """The sub-expressions that bound e's real domain: bases of non-integer powers (>= 0), logarithm
    arguments (> 0), arguments of the inverse trig/hyperbolic functions with a bounded real domain."""
    if not isinstance(e, sp.Basic) or not e.free_symbols:
        return []
    out: list[tuple[str, object]] = []
    for x in e.atoms(sp.Pow, sp.log, sp.asin, sp.acos, sp.acosh, sp.atanh, sp.asec, sp.acsc):
        if not x.free_symbols:
            continue
        if isinstance(x, sp.Pow):
            if x.exp.is_integer is not True:
                out.append(("nonneg", x.base))
        elif isinstance(x, sp.log):
            out.append(("pos", x.args[0]))
        elif isinstance(x, (sp.asin, sp.acos)):
            out.append(("unit", x.args[0]))
        elif isinstance(x, sp.acosh):
            out.append(("ge1", x.args[0]))
        elif isinstance(x, sp.atanh):
            out.append(("open_unit", x.args[0]))
        else:
            out.append(("out_unit", x.args[0]))
        if len(out) > 24:
            break
    return out


def _real_defined(branches: list, pt: dict) -> bool:
    """Is every branch argument real and inside its real domain at pt?"""
    for kind, arg in branches:
        v = _num(arg, pt)
        if v is None or abs(v.imag) > 1e-20 * max(1.0, abs(v)):
            return False
        r = v.real
        if (kind == "nonneg" and r < 0 or kind == "pos" and r <= 0 or kind == "unit" and abs(r) > 1
                or kind == "ge1" and r < 1 or kind == "open_unit" and abs(r) >= 1 or kind == "out_unit" and abs(r) < 1):
            return False
    return True


def _probe_eq(a, b, syms: list, tol: float) -> tuple[bool | None, str]:
    """a (the reference) vs b at probe points inside a's real domain: False at the first point where
    they differ or b is undefined while a is defined; True once WANT_PROBES points agree (MIN_PROBES
    at least); None when too few points lie in the domain. Then every finite point counts (complex
    values compared), as for references that are not real anywhere."""
    ba, bb = _branches(a), _branches(b)
    valid = 0
    loose: list[dict] = []  # points outside a's real domain, for the second pass
    for pt in _probe_points(syms, 12345):
        if not _real_defined(ba, pt):
            loose.append(pt)
            continue
        va = _num(a, pt)
        if va is None:
            continue
        vb = _num(b, pt) if _real_defined(bb, pt) else None
        if vb is None:
            return False, "undefined where the reference is defined"
        if not _close(va, vb, tol):
            return False, "differ at a probe point"
        valid += 1
        if valid >= WANT_PROBES:
            break
    if valid >= MIN_PROBES:
        return True, "equal at probe points"
    for pt in loose:
        va, vb = _num(a, pt), _num(b, pt)
        if va is None or vb is None:
            continue
        if not _close(va, vb, tol):
            return False, "differ at a probe point"
        valid += 1
        if valid >= WANT_PROBES:
            break
    if valid >= MIN_PROBES:
        return True, "equal at probe points"
    return None, "not shown equal"


def scalar_eq(a, b, approx: bool, o: Opts, int_exact: bool = False) -> tuple[bool, str]:
    """a (the reference side) vs b. int_exact: an integer reference is compared exactly even against
    a decimal answer (123456789.0 equals 123456789, 123456700.0 does not)."""
    if isinstance(a, sp.MatrixBase) or isinstance(b, sp.MatrixBase):
        if not (isinstance(a, sp.MatrixBase) and isinstance(b, sp.MatrixBase)) or a.shape != b.shape:
            return False, "matrix shapes differ"
        for x, y in zip(a, b, strict=True):
            ok, _ = scalar_eq(x, y, approx, o, int_exact)
            if not ok:
                return False, "matrix entries differ"
        return True, "matrices equal"
    if a == b:
        return True, "identical"
    if _has_bad(a) or _has_bad(b):
        return False, "non-finite differs"
    fa, fb = a.free_symbols, b.free_symbols
    if not fa and not fb:
        if approx and int_exact and isinstance(a, sp.Integer):
            approx = False  # a decimal answer must be that integer exactly, not within rel_tol
        if isinstance(a, sp.Rational) and isinstance(b, sp.Rational) and not approx:
            return False, "exact numbers differ"
        va, vb = _num(a), _num(b)
        if va is None or vb is None:
            return False, "not numeric"
        tol = max(o.rel_tol, 1e-12) if approx else 1e-15
        if not _close(va, vb, tol):
            return False, "numeric differ"
        if not approx and o.exact_confirm and not _exact_confirm(a, b, max(abs(va), abs(vb))):
            return False, "exact values differ (high precision)"
        return True, "numeric equal"
    if fa != fb:
        return False, "variables differ"
    syms = sorted(fa, key=lambda s: s.name)
    ok, why = _probe_eq(a, b, syms, max(o.rel_tol, 1e-9) if approx else 1e-9)
    if ok is not None:
        return ok, why
    try:
        if sp.count_ops(a) + sp.count_ops(b) < 120 and sp.simplify(a - b) == 0:
            return True, "symbolic difference is 0"
    except Exception:  # noqa: BLE001
        pass
    return False, "not shown equal"


MIN_ROUNDED_SIG = 3  # a reference decimal with at least this many significant digits may be a rounding


def _terminates(e) -> bool:
    """A rational whose decimal expansion ends (denominator 2^a 5^b): a decimal in disguise."""
    if not isinstance(e, sp.Rational):
        return False
    q = int(e.q)
    for f in (2, 5):
        while q % f == 0:
            q //= f
    return q == 1


def rounded_match(g: Q, p: Q, o: Opts) -> bool:
    """`rounded_reference="precision"`: a reference decimal of >= 3 significant digits (3.14, 12.57,
    0.3333) accepts an exact answer (pi, 4pi, 1/3) that rounds to it at the reference's own precision.
    Exact answers that are decimals in disguise (integers, 157/50) and decimal answers are not
    covered: those keep `rel_tol`."""
    if o.rounded_reference != "precision" or g.written is None or p.approx or g.pct or g.deg or p.pct or p.deg:
        return False
    places, sig = g.written
    e = p.e
    if sig < MIN_ROUNDED_SIG or not isinstance(e, sp.Basic) or e.free_symbols or _has_bad(e) or _terminates(e):
        return False
    v = _num(e)
    if v is None or abs(v.imag) > 1e-20:
        return False
    half_unit = sp.Rational(1, 2) / sp.Integer(10) ** places
    return abs(sp.Float(v.real, 30) - g.e) <= half_unit * (1 + sp.Rational(1, 10**9))


def q_eq(g: Q, p: Q, o: Opts) -> tuple[bool, str]:
    if rounded_match(g, p, o):
        return True, "rounds to the reference"
    approx = g.approx or p.approx
    if g.pct and p.pct or g.deg and p.deg:
        return scalar_eq(g.e, p.e, approx, o, int_exact=True)

    def cands(q: Q, other: Q):
        out = []
        if q.pct and not other.pct:
            out.append(q.e / 100)
            if o.percent == "flexible":
                out.append(q.e)
        elif q.deg and not other.deg:
            out.append(q.e)
            out.append(q.e * sp.pi / 180)
        else:
            out.append(q.e)
        return out

    reason = "differ"
    for x in cands(g, p):
        for y in cands(p, g):
            ok, reason = scalar_eq(x, y, approx, o, int_exact=True)
            if ok:
                return True, reason + (" (percent)" if g.pct or p.pct else "")
    return False, reason


# --------------------------------------------------------------------------- structures


def _rel_value(r: Rel):
    """The answer value of an '=' chain: 'x = 5' -> 5, '2+3 = 5' -> 5; None for real equations."""
    if all(op == "=" for op in r.ops):
        first = r.parts[0]
        last = r.parts[-1]
        if name_like(first):
            return last
        if _numeric(first) and _numeric(last):
            return last
        if len(r.parts) > 2 and all(name_like(x) or (isinstance(x, Q) and not x.e.free_symbols) for x in r.parts[:-1]):
            return r.parts[-1]
    return None


def _names_differ(a, b) -> bool:
    """Two named answers whose names hold known functions and differ (\\sin x = .. vs \\cos x = ..): compare
    the equations, not the values. Plain names may differ (x = 5 vs y = 5, f(x) = .. vs y = ..)."""
    if not (isinstance(a, Q) and isinstance(b, Q)) or a.e == b.e:
        return False
    return any(isinstance(v.e, sp.Basic) and any(not isinstance(f, AppliedUndef) for f in v.e.atoms(sp.Function))
               for v in (a, b))


def _numeric(v) -> bool:
    return isinstance(v, Q) and isinstance(v.e, sp.Basic) and not v.e.free_symbols


def _eqn_eq(g: Rel, p: Rel, o: Opts) -> tuple[bool, str]:
    if len(g.parts) != 2 or len(p.parts) != 2:
        if len(g.parts) >= 2 and len(p.parts) >= 2:
            return _eqn_eq(Rel([g.parts[0], g.parts[-1]], ["="]), Rel([p.parts[0], p.parts[-1]], ["="]), o)
        return False, "equations differ"
    try:
        d1 = _plain(g.parts[0]) - _plain(g.parts[1])
        d2 = _plain(p.parts[0]) - _plain(p.parts[1])
    except Exception:  # noqa: BLE001
        return False, "equations differ"
    if isinstance(d1, sp.MatrixBase) or isinstance(d2, sp.MatrixBase):
        return False, "matrix equations"
    if d1.free_symbols != d2.free_symbols or not d1.free_symbols:
        return False, "equations differ"
    syms = sorted(d1.free_symbols, key=lambda s: s.name)
    b1, b2 = _branches(d1), _branches(d2)
    ratio = None
    valid = 0
    for pt in _probe_points(syms, 7):
        if not _real_defined(b1, pt):
            continue  # outside the reference equation's real domain
        a = _num(d1, pt)
        b = _num(d2, pt) if _real_defined(b2, pt) else None
        if a is not None and b is None:
            return False, "equations differ"
        if a is None or b is None or abs(b) < 1e-12 or abs(a) < 1e-12:
            continue
        r = a / b
        if ratio is None:
            ratio = r
        elif not _close(r, ratio, 1e-8):
            return False, "equations differ"
        valid += 1
        if valid >= 5:
            break
    return (True, "equivalent equations") if valid >= 3 else (False, "equations not shown equal")


def _items(v) -> list | None:
    """Items of an unordered collection (bare list, braces, \\{..\\}, +-)."""
    if isinstance(v, Seq) and v.open in ("", "{"):
        out = []
        for it in v.items:
            out.extend(it.alts if isinstance(it, PM) else [it])
        return out
    if isinstance(v, SetV):
        out = []
        for it in v.items:
            out.extend(it.alts if isinstance(it, PM) else [it])
        return out
    if isinstance(v, PM):
        return list(v.alts)
    return None


def _ordered_list(g, o: Opts) -> bool:
    """Is the reference a list whose order counts (see `list_order`)?"""
    if o.list_order == "unordered" or not isinstance(g, Seq) or g.open != "":
        return False
    if o.list_order == "ordered":
        return True
    return g.commas and all(isinstance(x, Q) and not isinstance(x.e, sp.MatrixBase) for x in g.items)


_SOLUTION_LEAD = re.compile(
    r"(?:(?<![A-Za-z\\])[A-Za-z](?:_\{?\w+\}?)?\s*=|\b(?:solutions?|roots?|zeros?)\b[^.\n]{0,20}?\b(?:are|is)"
    r"|\b(?:solutions?|roots?|zeros?)\s*:)\s*(?:\$|\\\(|\\\[)?\s*$",
    re.IGNORECASE,
)


_ORDER_WORDS = re.compile(
    r"\bin\s+(?:increasing|decreasing|ascending|descending|any)\s+order\b|\bfrom\s+(?:smallest|least|largest|greatest|"
    r"lowest|highest)\s+to\b",
    re.IGNORECASE,
)


def _assigned(v):
    """The symbol of 'x = value', else None."""
    if isinstance(v, Rel) and v.ops == ["="] and len(v.parts) == 2 and isinstance(v.parts[0], Q):
        e = v.parts[0].e
        return e if isinstance(e, sp.Symbol) else None
    return None


def _pred_marks_set(lead: str, pv) -> bool:
    """The completion's own words say its list is a set of answers: it follows "the roots/solutions/
    zeros are" or "in increasing order", its items are joined by "or", or it gives one unknown several
    values (x = 3, x = -1 / x = 3, -1). Distinct names (a = 5, b = 3) and "the values are" stay ordered."""
    if _SOLUTION_LEAD.search(lead) or _ORDER_WORDS.search(lead):
        return True
    if not isinstance(pv, Seq) or pv.open != "" or not pv.items:
        return False
    if pv.alternatives:
        return True
    def unknown(e):  # x_1, x_2 name one unknown x
        return None if e is None else e.name.split("_", 1)[0]

    names = {unknown(_assigned(x)) for x in pv.items if isinstance(x, Rel)}
    first = unknown(_assigned(pv.items[0]))
    return first is not None and names == {first}


def _unordered_ref(v):
    """A reference list marked as a set of solutions by its context is unordered."""
    if isinstance(v, Seq) and v.open == "" and v.commas:
        return dataclasses.replace(v, commas=False)
    return v


def _unordered_eq(gi: list, pi: list, o: Opts) -> bool:
    if not gi or not pi or len(gi) > 64 or len(pi) > 64:
        return False
    for a in gi:
        if not any(eq(a, b, o)[0] for b in pi):
            return False
    for b in pi:
        if not any(eq(a, b, o)[0] for a in gi):
            return False
    return True


def _expand_rel_list(items: list) -> list:
    """'x = 1, x = 2' -> values; assignments keep their values."""
    out = []
    for it in items:
        if isinstance(it, Rel):
            v = _rel_value(it)
            if v is not None:
                out.extend(v.alts if isinstance(v, PM) else _items(v) if _items(v) is not None and isinstance(v, PM) else [v])
                continue
        out.append(it)
    return out


def _interval_list(v):
    """A bare list of intervals ('(-oo, -2) or (2, oo)', '(-oo, 1], (3, 5)') as their union, when at
    least one of them cannot be a point (an infinite end, or brackets that differ); else None."""
    if not (isinstance(v, Seq) and not v.open and len(v.items) > 1):
        return None
    sets = [as_set(x) if isinstance(x, Seq) else None for x in v.items]
    if any(x is None or not isinstance(x, sp.Interval) for x in sets):
        return None
    if not any({x.items[0].e, x.items[1].e} & {sp.oo, -sp.oo} or x.open + x.close in ("(]", "[)")
               for x in v.items):
        return None
    return sp.Union(*sets)


def _pieces(s) -> int:
    """How many intervals or points it takes to write a real set: 1 for an interval (or R), 2 for
    (-oo, 3) U (3, oo). Sets SymPy leaves unevaluated count as several."""
    if s is sp.S.EmptySet:
        return 0
    if isinstance(s, sp.Interval):
        return 1
    if isinstance(s, sp.FiniteSet):
        return len(s)
    if isinstance(s, sp.Union):
        return sum(_pieces(a) for a in s.args)
    return 2


def _inequality_form_ok(ref_set, policy: str, builder: bool = False) -> bool:
    """May an inequality answer stand for this interval/set reference? 'either': yes. 'required': no
    (Math-Verify's policy). 'union' (default): only when the reference is not one interval, i.e. the
    question's set takes a union of pieces (|x| > 2, x < 1 or x > 3, x != 3), which inequalities
    write as naturally as interval notation, or when the reference itself states conditions
    (set-builder); a single interval reference asked for interval notation."""
    if policy == "either":
        return True
    return policy == "union" and (builder or _pieces(ref_set) >= 2)


def eq(g, p, o: Opts) -> tuple[bool, str]:
    # text answers
    if isinstance(g, Text) or isinstance(p, Text):
        def tkey(v):
            if isinstance(v, Text):
                return re.sub(r"[^0-9a-z]", "", v.s.lower())
            if isinstance(v, Q) and isinstance(v.e, sp.Symbol):
                return re.sub(r"[^0-9a-z]", "", v.e.name.lower())
            if isinstance(v, Q) and v.e == sp.E:
                return "e"
            return None
        kg, kp = tkey(g), tkey(p)
        return (True, "text equal") if kg and kg == kp else (False, "text differs")
    # relations (and inequalities joined by or/and)
    g_rel, p_rel = isinstance(g, (Rel, Logic)), isinstance(p, (Rel, Logic))
    if g_rel and p_rel:
        if isinstance(g, Rel) and isinstance(p, Rel) and all(op == "=" for op in g.ops + p.ops):
            vg, vp = _rel_value(g), _rel_value(p)
            if (vg is not None and vp is not None and name_like(g.parts[0]) and name_like(p.parts[0])
                    and not _names_differ(g.parts[0], p.parts[0])):
                return eq(vg, vp, o)
            return _eqn_eq(g, p, o)
        sg, sp_ = rel_to_set(g), rel_to_set(p)
        if sg is not None and sp_ is not None:
            if rel_var(g) != rel_var(p):
                return False, "inequalities in different variables"
            return (True, "same solution set") if _set_equal(sg, sp_) else (False, "inequalities differ")
        return False, "relations differ"
    if g_rel or p_rel:
        r, other, rel_is_gold = (g, p, True) if g_rel else (p, g, False)
        v = _rel_value(r) if isinstance(r, Rel) else None
        if v is not None:
            return eq(v, other, o) if rel_is_gold else eq(other, v, o)
        so = as_set(other)
        so = _interval_list(other) if so is None else so
        s = rel_to_set(r) if so is not None else None
        if s is not None:
            if isinstance(other, SSet) and other.var is not None and other.var != rel_var(r):
                return False, "different variables"  # x \\in S vs t > 2
            if not rel_is_gold and not _inequality_form_ok(so, o.interval_form, getattr(other, "builder", False)):
                return False, "inequality answer for an interval/set reference"
            return (True, "same solution set") if _set_equal(s, so) else (False, "sets differ")
        return False, "relation vs value"
    # sets built with unions / intervals
    if isinstance(g, SSet) or isinstance(p, SSet):
        a, b = as_set(g), as_set(p)
        a = _interval_list(g) if a is None else a
        b = _interval_list(p) if b is None else b
        if a is None or b is None:
            return False, "set vs non-set"
        if getattr(g, "var", None) is not None and getattr(p, "var", None) is not None and g.var != p.var:
            return False, "different variables"
        return (True, "sets equal") if _set_equal(a, b) else (False, "sets differ")
    # ratios
    if isinstance(g, Ratio) or isinstance(p, Ratio):
        if isinstance(g, Ratio) and isinstance(p, Ratio):
            if len(g.items) == len(p.items) and all(eq(x, y, o)[0] for x, y in zip(g.items, p.items, strict=True)):
                return True, "ratios equal"
            if len(g.items) == len(p.items) == 2:
                try:
                    return eq(_div(g), _div(p), o)
                except Exception:  # noqa: BLE001
                    return False, "ratios differ"
            if len(g.items) == len(p.items) and not (g.clock or p.clock):
                return (True, "proportional ratios") if _proportional(g, p, o) else (False, "ratios differ")
            return False, "ratios differ"
        r, other = (g, p) if isinstance(g, Ratio) else (p, g)
        if len(r.items) == 2 and isinstance(other, Q):
            try:
                return eq(_div(r), other, o)
            except Exception:  # noqa: BLE001
                return False, "ratio differs"
        return False, "ratio vs value"
    # "5 or 7" for one value: every alternative must be it (a restatement, "1/2 or 0.5"), never one of them
    if isinstance(p, Seq) and p.alternatives and p.open == "" and isinstance(g, Q):
        alts = _expand_rel_list(p.items)
        if alts and all(eq(g, x, o)[0] for x in alts):
            return True, "every alternative equal"
        return False, "alternatives for one value"
    # collections
    gi, pi = _items(g), _items(p)
    if gi is not None and len(gi) == 1:
        return eq(gi[0], p, o)
    if pi is not None and len(pi) == 1:
        return eq(g, pi[0], o)
    if gi is not None and pi is not None:
        gi, pi = _expand_rel_list(gi), _expand_rel_list(pi)
        if _ordered_list(g, o) and not isinstance(p, PM):  # "\pm 3" names a pair, in no order
            if len(gi) != len(pi):
                return False, "lengths differ"
            if all(eq(x, y, o)[0] for x, y in zip(gi, pi, strict=True)):
                return True, "lists equal in order"
            return False, "elements or order differ"
        return (True, "same elements") if _unordered_eq(gi, pi, o) else (False, "elements differ")
    gs = isinstance(g, Seq) and g.open in "([" and g.open != ""
    ps = isinstance(p, Seq) and p.open in "([" and p.open != ""
    if gs or ps:
        if gs and ps and (g.open != p.open or g.close != p.close):
            return False, "brackets differ"
        if isinstance(g, Seq) and isinstance(p, Seq):
            a, b = _expand_rel_list(g.items), _expand_rel_list(p.items)
            if g.open == "{" or p.open == "{" or not (gs and ps):
                pass
            if len(a) != len(b):
                return False, "lengths differ"
            for x, y in zip(a, b, strict=True):
                ok, _ = eq(x, y, o)
                if not ok:
                    return False, "elements differ"
            return True, "tuples equal"
        if gi is not None or pi is not None:
            return False, "tuple vs list"
        # a vector written as a one-column matrix vs a tuple
        seq, m = (g, p) if gs else (p, g)
        if isinstance(m, Q) and isinstance(m.e, sp.MatrixBase) and 1 in m.e.shape and len(m.e) == len(seq.items):
            for x, y in zip(seq.items, list(m.e), strict=True):
                if not isinstance(x, Q) or not scalar_eq(_plain(x), y, x.approx or m.approx, o)[0]:
                    return False, "elements differ"
            return True, "vector equal"
        return False, "tuple vs value"
    if gi is not None or pi is not None:
        return False, "list vs value"
    if isinstance(g, SetV) or isinstance(p, SetV):
        return False, "set vs value"
    if isinstance(g, Q) and isinstance(p, Q):
        return q_eq(g, p, o)
    return False, "kinds differ"


def _proportional(g: Ratio, p: Ratio, o: Opts) -> bool:
    """a:b:c = ka:kb:kc for one k > 0 (2:4:6 = 1:2:3), by cross products against a non-zero pivot."""
    if not all(isinstance(x, Q) and isinstance(x.e, sp.Basic) and not x.e.free_symbols for x in g.items + p.items):
        return False
    gv, pv = [_plain(x) for x in g.items], [_plain(x) for x in p.items]
    approx = any(x.approx for x in g.items + p.items)
    k = next((i for i, x in enumerate(gv) if x != 0), None)
    if k is None or pv[k] == 0:
        return False
    scale = _num(gv[k] / pv[k])
    if scale is None or abs(scale.imag) > 1e-12 or scale.real <= 0:
        return False
    return all(scalar_eq(gv[i] * pv[k], pv[i] * gv[k], approx, o)[0] for i in range(len(gv)))


def _div(r: Ratio):
    a, b = r.items
    if not isinstance(a, Q) or not isinstance(b, Q) or b.e == 0:
        raise ValueError("ratio")
    return Q(_plain(a) / _plain(b), a.approx or b.approx)


def _set_equal(a, b) -> bool:
    if a == b:
        return True
    try:
        return sp.Complement(a, b) == sp.S.EmptySet and sp.Complement(b, a) == sp.S.EmptySet
    except Exception:  # noqa: BLE001
        return False


def _multi(v) -> bool:
    items = _items(v)
    if items is not None:
        return len(items) > 1
    if isinstance(v, Seq) and v.open in ("(", "[") and any(isinstance(i, Seq) for i in v.items):
        return True
    return False


# --------------------------------------------------------------------------- the check


def _parse_all(s: str, completion: bool = False):
    """Parse every reading of s; returns (values, error), values a list of (unit words, value, needs_unit).
    A completion's '10cm' is 10 with a unit. A reference's '10cm' is read as written (10*c*m, as MARIO
    does) and also as 10 cm, a reading that only counts against an answer that gives a unit too."""
    vals = []
    err = None
    for alt in alternatives(s):
        try:
            units: list[str] = []
            v = parse(alt, glued_units=completion, units_out=units)
            vals.append((sorted(units), v, False))
            if not completion and _GLUED_UNIT_RE.search(alt):
                glued: list[str] = []
                gv = parse(alt, glued_units=True, units_out=glued)
                vals.append((sorted(glued), gv, True))
        except TooLarge as e:
            err = err or ("too_large", str(e))
        except (ValueError, TypeError, ZeroDivisionError, AttributeError, IndexError, KeyError,
                RecursionError, NotImplementedError, sp.SympifyError) as e:
            err = err or ("parse_error", f"{type(e).__name__}: {e}"[:200])
    return vals, err


def _contains_text(v) -> bool:
    if isinstance(v, Text):
        return True
    if isinstance(v, (Seq, SetV)):
        return any(_contains_text(i) for i in v.items)
    if isinstance(v, (Ratio,)):
        return any(_contains_text(i) for i in v.items)
    if isinstance(v, Rel):
        return any(_contains_text(i) for i in v.parts)
    if isinstance(v, Logic):
        return any(_contains_text(i) for i in v.rels)
    return False


_FALLBACKS = ("last number", "last math block", "math blocks joined by or", "last number in words", "solutions phrase")


def _shown(v) -> str:
    """str() of a parsed value for the verdict, at most 500 characters (Python refuses to print integers
    over 4300 digits; the parser builds up to MAX_DIGITS)."""
    try:
        return str(v)[:500]
    except ValueError:
        return "<a number too long to print>"


def _alts_agree(alts: list[str], rv, o: Opts) -> bool:
    """Every value a completion offers beside its answer ("\\boxed{5} or maybe 7") equals the reference
    too: a restatement (1/2 or 0.5) passes, a hedge between different values does not."""
    for a in alts:
        avals, _ = _parse_all(a, completion=True)
        if not any(_safe_eq(rv, av, o) for _, av, _ in avals):
            return False
    return True


def _safe_eq(g, p, o: Opts) -> bool:
    try:
        return eq(g, p, o)[0]
    except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError, NotImplementedError,
            IndexError, KeyError):
        return False


def check(completion: str, answer: str, opts: dict) -> dict:
    t0 = time.perf_counter()
    o = Opts(opts)

    def done(reward, status, reason, extracted=None, pp=None, pr=None):
        return {
            "reward": float(reward), "status": status, "extracted": extracted,
            "parsed_pred": None if pp is None else _shown(pp),
            "parsed_ref": None if pr is None else _shown(pr),
            "reason": reason, "time_s": time.perf_counter() - t0,
        }

    if not isinstance(completion, str) or not isinstance(answer, str):
        return done(0, "parse_error", "inputs must be strings")
    if len(completion) > o.max_completion_chars:
        completion = completion[-o.max_completion_chars :]
    if len(answer) > o.max_completion_chars:
        return done(0, "too_large", "reference too long")
    # sizes first: normalisation and parsing only ever see answers of at most max_answer_chars
    ref = extract(answer, is_reference=True)
    ref_text = ref.joined or ref.answer
    if ref_text and len(ref_text) > o.max_answer_chars:
        return done(0, "too_large", "reference answer too long")
    if not ref.answer or not normalize(ref.answer):
        return done(0, "no_answer", "empty reference")
    pred = extract(completion, o.fallback, o.strip_think)
    if pred.answer and (len(pred.answer) > o.max_answer_chars or len(pred.joined or "") > o.max_answer_chars):
        return done(0, "too_large", "answer too long", pred.answer[:200])
    if not pred.answer or not normalize(pred.answer):
        if pred.how.startswith("hedged") and _CODE_RE.search(completion):
            return done(0, "parse_error", "code-like answer refused")
        return done(0, "no_answer", pred.how or "no answer found")

    if _CODE_RE.search(pred.answer) or (pred.how in _FALLBACKS and _CODE_RE.search(completion)):
        return done(0, "parse_error", "code-like answer refused", pred.answer)
    if pred.alternatives and pred.run:
        # boxes joined by "or" are one answer, alternatives (\\boxed{3} or \\boxed{-1}), never the last box alone
        pred = dataclasses.replace(pred, answer=" or ".join(pred.run))
    # identical text (after light normalisation) needs no parsing
    rk = text_key(normalize(ref_text))
    if not pred.alts and rk and (rk == text_key(normalize(pred.answer))
                                 or (pred.joined and rk == text_key(normalize(pred.joined)))):
        return done(1, "ok", "identical text", pred.answer)

    rvals, rerr = _parse_all(ref_text)
    if not rvals:
        status, msg = rerr or ("parse_error", "reference did not parse")
        return done(0, status, f"reference: {msg}", pred.answer)
    if ref.joined or _SOLUTION_LEAD.search(ref.lead):
        # several boxes, or "the solutions are x = \boxed{1, -2}": a set of answers
        rvals = [(t, _unordered_ref(v), g) for t, v, g in rvals]
    ref_multi = any(_multi(v) for _, v, _ in rvals)
    pred_texts = []
    if pred.joined and ref_multi:
        pred_texts.append(pred.joined)
    pred_texts.append(pred.answer)
    if (pred.how in ("bare", "phrase", "last math block", "solutions phrase") and o.fallback == "last_number"
            and not pred.hedged):  # "7, not 5", "5 or 7", "x > 5" are not their last number
        ln = last_number(pred.answer)
        if ln and ln != pred.answer:
            pred_texts.append(ln)
    first_err = None
    last_pv = None
    for i, ptxt in enumerate(pred_texts):
        pvals, perr = _parse_all(ptxt, completion=True)
        if not pvals:
            first_err = first_err or perr
            if perr and perr[0] == "too_large":
                break
            continue
        is_fallback = i == len(pred_texts) - 1 and i > 0 and ptxt not in (pred.answer, pred.joined)
        if is_fallback and last_pv is not None and not any(_contains_text(v) for _, v, _ in last_pv):
            break
        last_pv = pvals
        for r_units, rv, needs_unit in rvals:
            for p_units, pv, _ in pvals:
                if needs_unit and not p_units:
                    continue
                if o.units == "strict" and r_units != p_units:
                    why = "units differ"  # the unit words must agree too
                    continue
                if o.list_order == "reference" and (
                        _pred_marks_set(pred.lead, pv) or (ptxt == pred.joined and pred.alternatives)):
                    rv = _unordered_ref(rv)
                try:
                    ok, why = eq(rv, pv, o)
                except TooLarge as e:
                    return done(0, "too_large", str(e), ptxt, pv, rv)
                except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError,
                        NotImplementedError, IndexError, KeyError) as e:
                    ok, why = False, f"compare failed: {type(e).__name__}"
                if ok and not _alts_agree(pred.alts, rv, o):
                    return done(0, "ok", "hedged between different values", ptxt, pv, rv)
                if ok:
                    return done(1, "ok", why, ptxt, pv, rv)
    if last_pv is None:
        status, msg = first_err or ("parse_error", "answer did not parse")
        return done(0, status, msg, pred.answer, None, rvals[0][1])
    return done(0, "ok", why, pred.answer, last_pv[0][1], rvals[0][1])
