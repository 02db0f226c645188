"""Arithmetic on parsed quantities: + - * / ^ with percent and degree marks, +- alternatives and size guards
(no SymPy operation runs on a number larger than the limits allow)."""

from __future__ import annotations

import math

import sympy as sp

from .sets import set_difference
from .values import (
    MAX_ALTERNATIVES,
    MAX_DIGITS,
    MAX_SYMBOLIC_EXP,
    PM,
    ParseError,
    Q,
    SetV,
    SSet,
    TooLarge,
    as_quantity,
    plain_value,
)


def _digits(x) -> float:
    """Rough decimal size of a SymPy rational."""
    if isinstance(x, sp.Integer):
        return abs(int(x)).bit_length() * 0.30103
    if isinstance(x, sp.Rational):
        return max(abs(int(x.p)).bit_length(), abs(int(x.q)).bit_length()) * 0.30103
    return 0.0


def check_size(e):
    if isinstance(e, sp.Rational) and _digits(e) > MAX_DIGITS:
        raise TooLarge("number too large")
    return e


def safe_pow(b, x):
    if isinstance(x, sp.Number) and isinstance(b, sp.Number):
        if b in (sp.Integer(0), sp.Integer(1), sp.Integer(-1)):
            return b ** x
        if isinstance(x, sp.Rational):
            size = abs(float(b)) if not isinstance(b, sp.Float) else abs(float(b))
            if size == 0 or math.isinf(size):
                raise TooLarge("exponent too large")
            mag = abs(math.log10(size)) if size > 0 else 0
            if abs(int(x.p)).bit_length() > 64 or abs(int(x.p)) * max(mag, 0.3) > MAX_DIGITS:
                raise TooLarge("exponent too large")
        elif isinstance(x, sp.Float) and abs(float(x)) > MAX_DIGITS:
            raise TooLarge("exponent too large")
    elif isinstance(x, sp.Number):
        if isinstance(x, sp.Rational) and abs(int(x.p)) > MAX_SYMBOLIC_EXP:
            raise TooLarge("exponent too large")
        if isinstance(x, sp.Float) and abs(float(x)) > MAX_SYMBOLIC_EXP:
            raise TooLarge("exponent too large")
    elif isinstance(b, sp.Number) and x.is_number:
        # e.g. 2^(5^(1/2)) or towers with symbolic parts: bound the magnitude numerically
        try:
            v = float(sp.Abs(x).evalf(15))
        except Exception:  # noqa: BLE001
            v = 0.0
        if v > MAX_DIGITS:
            raise TooLarge("exponent too large")
    return check_size(b ** x)


def binop(op: str, a, b):
    if isinstance(a, PM) or isinstance(b, PM):
        la = a.alts if isinstance(a, PM) else [a]
        lb = b.alts if isinstance(b, PM) else [b]
        if len(la) * len(lb) > MAX_ALTERNATIVES:
            raise TooLarge("too many alternatives")
        return PM([binop(op, x, y) for x in la for y in lb])
    if op == "-" and (isinstance(a, (SSet, SetV)) or isinstance(b, (SSet, SetV))):
        d = set_difference(a, b)  # \\mathbb{R} - \\{0\\}
        if d is not None:
            return d
    a, b = as_quantity(a), as_quantity(b)
    approx = a.approx or b.approx
    if op in "+-":
        if a.pct and b.pct:
            ea, eb, pct, deg = a.e, b.e, True, False
        elif a.deg and b.deg:
            ea, eb, pct, deg = a.e, b.e, False, True
        else:
            ea, eb, pct, deg = plain_value(a), plain_value(b), False, False
        return Q(check_size(ea + eb if op == "+" else ea - eb), approx, pct, deg)
    if op == "*":
        if a.pct and not b.pct and not b.deg:
            return Q(check_size(a.e * b.e), approx, pct=True)
        if b.pct and not a.pct and not a.deg:
            return Q(check_size(a.e * b.e), approx, pct=True)
        if a.deg and not b.deg and not b.pct:
            return Q(check_size(a.e * b.e), approx, deg=True)
        if b.deg and not a.deg and not a.pct:
            return Q(check_size(a.e * b.e), approx, deg=True)
        ea, eb = plain_value(a), plain_value(b)
        if isinstance(ea, sp.MatrixBase) and isinstance(eb, sp.MatrixBase) and ea.shape[1] != eb.shape[0]:
            raise ParseError("matrix shapes")
        return Q(check_size(ea * eb), approx)
    if op == "/":
        if (a.pct and b.pct) or (a.deg and b.deg):
            ea, eb = a.e, b.e
            pct = deg = False
        elif a.pct or a.deg:
            ea, eb = a.e, b.e
            pct, deg = a.pct, a.deg
        else:
            ea, eb = plain_value(a), plain_value(b)
            pct = deg = False
        if isinstance(eb, sp.MatrixBase):
            raise ParseError("division by a matrix")
        return Q(check_size(ea / eb), approx, pct, deg)
    if op == "^":
        ea, eb = plain_value(a), plain_value(b)
        if isinstance(ea, sp.MatrixBase):
            if isinstance(eb, sp.Integer) and 0 <= int(eb) <= 64 and ea.is_square:
                return Q(ea ** int(eb), approx)
            raise ParseError("matrix power")
        return Q(safe_pow(ea, eb), approx)
    raise ParseError(op)


def neg(a):
    if isinstance(a, PM):
        return PM([neg(x) for x in a.alts])
    a = as_quantity(a)
    return Q(-a.e, a.approx, a.pct, a.deg, a.written)

