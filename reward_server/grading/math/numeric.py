"""Scalars compared: exact numbers exactly, decimals within rel_tol, expressions at probe points inside
the reference's real domain, percent/degree readings, and a reference decimal taken as a rounding."""

from __future__ import annotations

import random

import sympy as sp

from .options import MathOptions
from .values import Q


def _has_bad(e) -> bool:
    return any(x in (sp.oo, -sp.oo, sp.zoo, sp.nan) for x in sp.preorder_traversal(e)) if isinstance(e, sp.Basic) else True


def evaluate(e, subs=None):
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


def near(a: complex, b: complex, tol: float) -> bool:
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


def probe_points(syms: list, seed: int):
    """Deterministic probe points (30-digit floats, never integers) over the buckets above."""
    rnd = random.Random(seed)
    for k in range(MAX_PROBES):
        yield {s: sp.Float(rnd.uniform(*_BUCKETS[(k + j * k) % len(_BUCKETS)]), 30) for j, s in enumerate(syms)}


def domain_branches(e) -> list[tuple[str, object]]:
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


def real_defined(branches: list, pt: dict) -> bool:
    """Is every branch argument real and inside its real domain at pt?"""
    for kind, arg in branches:
        v = evaluate(arg, pt)
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
    ba, bb = domain_branches(a), domain_branches(b)
    valid = 0
    loose: list[dict] = []  # points outside a's real domain, for the second pass
    for pt in probe_points(syms, 12345):
        if not real_defined(ba, pt):
            loose.append(pt)
            continue
        va = evaluate(a, pt)
        if va is None:
            continue
        vb = evaluate(b, pt) if real_defined(bb, pt) else None
        if vb is None:
            return False, "undefined where the reference is defined"
        if not near(va, vb, tol):
            return False, "differ at a probe point"
        valid += 1
        if valid >= WANT_PROBES:
            break
    if valid >= MIN_PROBES:
        return True, "equal at probe points"
    for pt in loose:
        va, vb = evaluate(a, pt), evaluate(b, pt)
        if va is None or vb is None:
            continue
        if not near(va, vb, tol):
            return False, "differ at a probe point"
        valid += 1
        if valid >= WANT_PROBES:
            break
    if valid >= MIN_PROBES:
        return True, "equal at probe points"
    return None, "not shown equal"


def scalar_eq(a, b, approx: bool, o: MathOptions, int_exact: bool = False) -> tuple[bool, str]:
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
        va, vb = evaluate(a), evaluate(b)
        if va is None or vb is None:
            return False, "not numeric"
        tol = max(o.rel_tol, 1e-12) if approx else 1e-15
        if not near(va, vb, tol):
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


def rounded_match(g: Q, p: Q, o: MathOptions) -> bool:
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
    v = evaluate(e)
    if v is None or abs(v.imag) > 1e-20:
        return False
    half_unit = sp.Rational(1, 2) / sp.Integer(10) ** places
    return abs(sp.Float(v.real, 30) - g.e) <= half_unit * (1 + sp.Rational(1, 10**9))


def q_eq(g: Q, p: Q, o: MathOptions) -> tuple[bool, str]:
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

