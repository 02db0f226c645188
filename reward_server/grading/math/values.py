"""The kinds of value an answer parses to (quantity, relation, list, set, ratio, text, +-), the parser's
size limits and errors, and the small accessors every later stage shares."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp
from sympy.core.function import AppliedUndef

MAX_DIGITS = 10_000  # largest exact number we build
MAX_SYMBOLIC_EXP = 10_000
MAX_FACTORIAL = 5_000
MAX_DEPTH = 60
MAX_TOKENS = 4_000
MAX_ALTERNATIVES = 16
MAX_CELLS = 400


class ParseError(ValueError):
    pass


class TooLarge(ValueError):
    pass


@dataclass
class Q:
    """A scalar (or matrix) quantity with how it was written."""

    e: object
    approx: bool = False  # a decimal literal took part
    pct: bool = False  # written with a percent sign
    deg: bool = False  # written with a degree sign
    written: tuple[int, int] | None = None  # one decimal literal: (decimal places, significant digits)

    def __str__(self) -> str:
        s = str(self.e)
        return s + ("%" if self.pct else "") + ("deg" if self.deg else "")


@dataclass
class Rel:
    parts: list
    ops: list

    def __str__(self) -> str:
        out = str(self.parts[0])
        for op, p in zip(self.ops, self.parts[1:], strict=False):
            out += f" {op} {p}"
        return out


@dataclass
class Logic:
    """Inequalities joined by 'or' (a union) or 'and' (an intersection): x < -2 or x > 2; ',' (a comma
    list in one variable, 'x > 0, x != 1'): the intersection, or the union when that is empty."""

    rels: list
    op: str

    def __str__(self) -> str:
        return (", " if self.op == "," else f" {self.op} ").join(str(r) for r in self.rels)


@dataclass
class Seq:
    items: list
    open: str = ""  # '' bare list, '(' '[' brackets, '{' bare braces
    close: str = ""
    commas: bool = False  # a bare list written with commas only (no and/or/;, not from cases)
    alternatives: bool = False  # its items were joined by "or" (x = 3 or x = -1)

    def __str__(self) -> str:
        return self.open + ", ".join(str(i) for i in self.items) + self.close


@dataclass
class SetV:
    items: list  # \{ ... \}

    def __str__(self) -> str:
        return "{" + ", ".join(str(i) for i in self.items) + "}"


@dataclass
class SSet:
    s: object  # a sympy Set
    var: object = None  # the variable a reference names ('x \\in S'), which an inequality answer must use
    builder: bool = False  # written in set-builder notation: its conditions are inequalities already

    def __str__(self) -> str:
        return str(self.s)


@dataclass
class Ratio:
    items: list
    clock: bool = False  # 3+ terms, every later one two digits ("10:05:30"): a time, not a ratio

    def __str__(self) -> str:
        return ":".join(str(i) for i in self.items)


@dataclass
class Text:
    s: str

    def __str__(self) -> str:
        return f"text({self.s})"


@dataclass
class PM:
    """Several alternatives from +- (a list of Q)."""

    alts: list = field(default_factory=list)

    def __str__(self) -> str:
        return "{" + ", ".join(str(a) for a in self.alts) + "}"


def as_quantity(v) -> Q:
    if isinstance(v, Q):
        return v
    if isinstance(v, PM):
        raise ParseError("unexpected +-")
    raise ParseError(f"expected a quantity, got {type(v).__name__}")


def radians(q: Q):
    return q.e * sp.pi / 180 if q.deg else q.e


def plain_value(q: Q):
    """Value of q when combined with other quantities (percent/degree resolved)."""
    e = q.e
    if q.pct:
        e = e / 100
    if q.deg:
        e = e * sp.pi / 180
    return e


def marked(v, pct: bool = False, deg: bool = False):
    if isinstance(v, PM):
        return PM([marked(a, pct, deg) for a in v.alts])
    if isinstance(v, Seq):
        return Seq([marked(a, pct, deg) for a in v.items], v.open, v.close, v.commas)
    q = as_quantity(v)
    return Q(q.e, q.approx, q.pct or pct, q.deg or deg)


def name_like(v) -> bool:
    """A left-hand side that names the answer: x, f(x), \\sin\\theta, |AB|, A:B, NO/BO, (p, q); no numbers,
    no sums."""
    if isinstance(v, Ratio):
        return all(name_like(i) for i in v.items)
    if isinstance(v, Text):
        return bool(re.fullmatch(r"[A-Za-z][A-Za-z ]{0,30}", v.s.strip()))  # \\text{Area} = 12
    if isinstance(v, Seq) and v.open in ("(", "[") and v.items:
        return all(name_like(i) for i in v.items)
    if not isinstance(v, Q) or isinstance(v.e, sp.MatrixBase):
        return False
    e = v.e
    if not isinstance(e, sp.Basic) or not e.free_symbols:
        return False
    for node in sp.preorder_traversal(e):
        if isinstance(node, (sp.Symbol, sp.Mul, sp.Abs, AppliedUndef, sp.Function)):
            continue  # sp.Function: a named function of the variables, \\sin\\theta, \\log x
        if isinstance(node, sp.Pow) and node.exp == -1:
            continue
        if node == sp.Integer(-1) :
            continue
        return False
    return not (isinstance(e, sp.Mul) and e.could_extract_minus_sign())

