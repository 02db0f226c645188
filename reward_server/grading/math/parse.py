"""A LaTeX / plain-text math parser that builds SymPy objects directly.

No string is ever handed to ``sympify``/``parse_expr``/``eval``: a tokenizer and a
recursive-descent (precedence climbing) grammar build SymPy objects node by node, with
size guards on exponents, factorials, nesting depth and token counts. Anything the
grammar does not know is either a symbol, a word (unit or text answer) or a parse error.
"""

from __future__ import annotations

import math
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


# --------------------------------------------------------------------------- values


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


# --------------------------------------------------------------------------- tokenizer

FUNCS = {
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "sec": sp.sec, "csc": sp.csc, "cot": sp.cot,
    "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan, "asin": sp.asin, "acos": sp.acos,
    "atan": sp.atan, "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "exp": sp.exp,
    "ln": sp.log, "log": sp.log, "lg": None, "sqrt": sp.sqrt, "arccot": sp.acot, "cosec": sp.csc,
    "abs": sp.Abs, "floor": sp.floor, "ceil": sp.ceiling,
}
INVERSE = {"sin": sp.asin, "cos": sp.acos, "tan": sp.atan, "sec": sp.asec, "csc": sp.acsc, "cot": sp.acot}
TRIG = {"sin", "cos", "tan", "sec", "csc", "cot", "cosec"}
GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta",
    "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi",
    "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega",
}
REL_CMDS = {
    "le": "<=", "leq": "<=", "leqslant": "<=", "leqq": "<=", "ge": ">=", "geq": ">=", "geqslant": ">=", "geqq": ">=",
    "ne": "!=", "neq": "!=", "lt": "<", "gt": ">", "approx": "~", "in": "in", "notin": "notin", "equiv": "=",
    "Rightarrow": ";", "implies": ";", "Longrightarrow": ";", "iff": ";", "to": "->",
}
SKIP_CMDS = {
    "left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "displaystyle",
    "textstyle", "limits", ",", "!", ";", ":", " ", "quad", "qquad", "enspace", "thinspace", "nonumber",
    "hline", "mathbb", "mathcal", "vec", "overline", "overrightarrow", "hat", "bar", "mathit", "angle",
    "measuredangle", "triangle", "tag", "notag", "phantom", "underline", "cancel", "middle",
    "hspace", "vspace", "hphantom", "vphantom", "kern", "hskip", "medspace", "thickspace", "negthinspace",
}
CMD_ALIASES = {"bigcup": "cup", "bigcap": "cap"}  # between two sets they are the binary operations
SIUNITX = {"num", "SI", "qty", "si", "unit"}
TEXT_CMDS = {"text", "mbox", "textnormal", "textit", "textrm", "textsf", "texttt", "hbox", "emph"}
STYLE_CMDS = {"mathrm", "mathbf", "textbf", "boldsymbol", "bm", "mathsf", "operatorname", "mathtt", "mathup", "bold"}
UNICODE = {
    "π": "\\pi ", "∞": "\\infty ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "×": "\\times ", "·": "\\cdot ",
    "÷": "\\div ", "−": "-", "–": "-", "√": "\\sqrt ", "°": "^\\circ ", "∪": "\\cup ", "∩": "\\cap ",
    "±": "\\pm ", "∈": "\\in ", "≈": "\\approx ", "²": "^2", "³": "^3", "⋅": "\\cdot ", "∶": ":",
    "，": ",", "；": ";", "：": ":", "（": "(", "）": ")", "ℝ": "\\mathbb{R}", "ℤ": "\\mathbb{Z}",
    "ℕ": "\\mathbb{N}", "ℚ": "\\mathbb{Q}", "ℂ": "\\mathbb{C}", "∖": "\\setminus ", "⟨": "\\langle ",
    "⟩": "\\rangle ", "∉": "\\notin ", "∨": "\\lor ", "∧": "\\land ", "∣": "\\mid ",
}
# number sets: \mathbb{R}, \R, ... (a token of kind "set"); ^+ / ^- restrict them to one sign
NUMSETS = {"R": sp.S.Reals, "Z": sp.S.Integers, "N": sp.S.Naturals, "Q": sp.S.Rationals, "C": sp.S.Complexes}
NUMSET_CMDS = {"R": "R", "Z": "Z", "N": "N", "Q": "Q", "Reals": "R", "reals": "R", "Complex": "C"}
_NUMSET_ARG = re.compile(r"\s*\{\s*([RZNQC])\s*\}|\s+([RZNQC])(?![A-Za-z])")
PERCENT_WORDS = {"percent", "pct", "percentage", "percents"}
DEGREE_WORDS = {"degree", "degrees", "deg"}
SEP_WORDS = {"and", "or"}
# multiplier words after a quantity scale it ("2 million" = 2000000, "3 dozen" = 36); without this
# they would be dropped as unit words and "2 million" would equal 2. Single letters (k, M, B) stay
# variables: "2k" is 2k, not 2000.
MULTIPLIERS = {
    "hundred": 10**2, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12,
    "quadrillion": 10**15, "dozen": 12, "lakh": 10**5, "crore": 10**7, "bn": 10**9, "mln": 10**6, "bln": 10**9,
}
MULTIPLIERS |= {w + "s": v for w, v in list(MULTIPLIERS.items()) if len(w) > 3}
# words that turn a number into a bound or a hedge: never dropped as unit words after it
# ("5 \\text{ or more}", "5 at most", "12 \\text{ not } 7" are not 5 / 12)
HEDGE_WORDS = {
    "or", "nor", "not", "no", "either", "neither", "more", "less", "fewer", "least", "most", "than", "maybe",
    "perhaps", "possibly", "probably", "except", "unless", "if", "between", "above", "below", "up", "over", "under",
    "approximately", "about", "roughly", "around", "nearly", "almost", "wrong", "incorrect", "isn",
}
CONST_WORDS = {"pi": sp.pi, "oo": sp.oo, "inf": sp.oo, "infty": sp.oo, "infinity": sp.oo}
FUNC_LETTERS = set("fghFGHWPQ")
# two-letter unit symbols read as units when glued to a number (10cm, 5kg); single letters (m, g, s)
# stay variables, longer words are units anyway
GLUED_UNITS = {
    "cm", "mm", "km", "nm", "dm", "kg", "mg", "ml", "mL", "cl", "dl", "dL", "ft", "yd", "mi", "hr", "lb",
    "oz", "cc", "kW", "kJ", "Hz", "mA", "kV", "ha",
}


@dataclass
class Tok:
    kind: str  # num id word cmd op text end
    val: str
    space: bool = False  # whitespace before it


_num_re = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+(?![a-zA-Z]))?|\.\d+(?:[eE][+-]?\d+(?![a-zA-Z]))?")


def _read_group(s: str, i: int) -> tuple[str, int]:
    """s[i] == '{': return the raw content and the index after the matching '}'."""
    depth = 0
    j = i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1 : j], j + 1
        j += 1
    raise ParseError("unbalanced braces")


def tokenize(s: str, glued_units: bool = False) -> list[Tok]:
    """Tokens of s. glued_units: a known two-letter unit glued to a number (10cm) is a unit word."""
    for k, v in UNICODE.items():
        if k in s:
            s = s.replace(k, v)
    toks: list[Tok] = []
    i, n = 0, len(s)
    space = False
    while i < n:
        if len(toks) > MAX_TOKENS:
            raise TooLarge("too many tokens")
        c = s[i]
        if c.isspace() or c == "~":
            space = True
            i += 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and s[i + 1].isdigit()):
            m = _num_re.match(s, i)
            assert m
            toks.append(Tok("num", m.group(0), space))
            i = m.end()
        elif c.isalpha() and c.isascii():
            j = i
            while j < n and s[j].isalpha() and s[j].isascii():
                j += 1
            w = s[i:j]
            prev_num = bool(toks) and toks[-1].kind == "num"
            if glued_units and prev_num and not space and w in GLUED_UNITS:
                toks.append(Tok("word", w, space))  # 10cm, 5kg: a unit, not c*m
            elif len(w) == 1:
                toks.append(Tok("id", w, space))
            elif w in FUNCS or w in CONST_WORDS or w in SEP_WORDS or w in PERCENT_WORDS or w in DEGREE_WORDS:
                toks.append(Tok("word", w, space))
            elif len(w) >= 3 or (space and prev_num):
                toks.append(Tok("word", w, space))
            else:
                for ch in w:
                    toks.append(Tok("id", ch, space))
                    space = False
            i = j
        elif c == "\\":
            if i + 1 >= n:
                i += 1
                continue
            d = s[i + 1]
            if d.isalpha():
                j = i + 1
                while j < n and s[j].isalpha():
                    j += 1
                name = s[i + 1 : j]
                i = j
                if name in ("mathbb", "Bbb") and (m := _NUMSET_ARG.match(s, i)):
                    toks.append(Tok("set", m.group(1) or m.group(2), space))  # \mathbb{R}: a number set
                    i = m.end()
                    space = False
                    continue
                if name in NUMSET_CMDS:
                    toks.append(Tok("set", NUMSET_CMDS[name], space))
                    space = False
                    continue
                if name in SKIP_CMDS:
                    if name in ("left", "right") and i < n and s[i] == ".":
                        i += 1
                    if name in ("mathbb", "mathcal", "vec", "overline", "overrightarrow", "hat", "bar",
                                "mathit", "underline", "cancel") and i < n and s[i] == "{":
                        pass  # the group is parsed as a plain group
                    if name in ("hspace", "vspace") and i < n and s[i] == "*":
                        i += 1
                    if name in ("tag", "phantom", "hspace", "vspace", "hphantom", "vphantom") and i < n and s[i] == "{":
                        _, i = _read_group(s, i)
                    continue
                if name in SIUNITX and i < n and s[i] == "{":
                    # siunitx: \num{4096}, \SI{10}{cm}, \qty{10}{\centi\metre}, \si{cm}
                    first, i = _read_group(s, i)
                    unit = ""
                    if name in ("SI", "qty") and i < n and s[i] == "{":
                        unit, i = _read_group(s, i)
                    elif name in ("si", "unit"):
                        first, unit = "", first
                    unit = re.sub(r"[\\{}]", " ", unit).strip()
                    s = s[:i] + " " + first + (" \\text{" + unit + "} " if unit else " ") + s[i:]
                    n = len(s)
                    continue
                if name in TEXT_CMDS or name in STYLE_CMDS:
                    while i < n and s[i] == " ":
                        i += 1
                    if i < n and s[i] == "{":
                        content, i = _read_group(s, i)
                    else:
                        content = s[i : i + 1]
                        i += 1
                    if name in STYLE_CMDS and (len(content.strip()) <= 1 or not re.fullmatch(r"\s*[A-Za-z]+\s*", content)):
                        s = s[:i] + " " + content + " " + s[i:]
                        n = len(s)
                        continue
                    toks.append(Tok("text", content, space))
                elif name == "begin" or name == "end":
                    if i < n and s[i] == "{":
                        env, i = _read_group(s, i)
                    else:
                        raise ParseError("bad environment")
                    if name == "begin" and env.strip() == "array" and i < n and s[i] == "{":
                        _, i = _read_group(s, i)
                    toks.append(Tok("begin" if name == "begin" else "endenv", env.strip().rstrip("*"), space))
                elif name in ("langle", "rangle"):
                    toks.append(Tok("op", "(" if name == "langle" else ")", space))  # a vector <1, 2>
                else:
                    toks.append(Tok("cmd", CMD_ALIASES.get(name, name), space))
            elif d == "\\":
                toks.append(Tok("op", "\\\\", space))
                i += 2
            elif d in "{}|%$#&_":
                v = {"{": "\\{", "}": "\\}", "|": "|", "%": "%", "$": "", "#": "", "&": "&", "_": "_"}[d]
                if v:
                    toks.append(Tok("op", v, space))
                i += 2
            else:  # spacing like "\," "\!" "\ " "\;"
                i += 2
        else:
            two = s[i : i + 2]
            if two in ("<=", ">=", "!=", "==", "**", "=<", "=>"):
                toks.append(Tok("op", {"**": "^", "==": "=", "=<": "<=", "=>": ">="}.get(two, two), space))
                i += 2
            elif c in "+-*/^_()[]{},;:=<>!|&'%":
                toks.append(Tok("op", c, space))
                i += 1
            elif c in "$":
                i += 1
            elif c in "?\"`" or c == "." or c in "€£¥" or not c.isascii():
                # punctuation and non-ASCII noise: sentence ends, currency, quotes
                if c == ".":
                    toks.append(Tok("op", ".", space))
                i += 1
            else:
                raise ParseError(f"unexpected character {c!r}")
        space = False
    toks.append(Tok("end", "", space))
    return toks


# --------------------------------------------------------------------------- helpers


def _digits(x) -> float:
    """Rough decimal size of a SymPy rational."""
    if isinstance(x, sp.Integer):
        return abs(int(x)).bit_length() * 0.30103
    if isinstance(x, sp.Rational):
        return max(abs(int(x.p)).bit_length(), abs(int(x.q)).bit_length()) * 0.30103
    return 0.0


def _check_size(e):
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
    return _check_size(b ** x)


def _q(v) -> Q:
    if isinstance(v, Q):
        return v
    if isinstance(v, PM):
        raise ParseError("unexpected +-")
    raise ParseError(f"expected a quantity, got {type(v).__name__}")


def _to_rad(q: Q):
    return q.e * sp.pi / 180 if q.deg else q.e


def _plain(q: Q):
    """Value of q when combined with other quantities (percent/degree resolved)."""
    e = q.e
    if q.pct:
        e = e / 100
    if q.deg:
        e = e * sp.pi / 180
    return e


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
    a, b = _q(a), _q(b)
    approx = a.approx or b.approx
    if op in "+-":
        if a.pct and b.pct:
            ea, eb, pct, deg = a.e, b.e, True, False
        elif a.deg and b.deg:
            ea, eb, pct, deg = a.e, b.e, False, True
        else:
            ea, eb, pct, deg = _plain(a), _plain(b), False, False
        return Q(_check_size(ea + eb if op == "+" else ea - eb), approx, pct, deg)
    if op == "*":
        if a.pct and not b.pct and not b.deg:
            return Q(_check_size(a.e * b.e), approx, pct=True)
        if b.pct and not a.pct and not a.deg:
            return Q(_check_size(a.e * b.e), approx, pct=True)
        if a.deg and not b.deg and not b.pct:
            return Q(_check_size(a.e * b.e), approx, deg=True)
        if b.deg and not a.deg and not a.pct:
            return Q(_check_size(a.e * b.e), approx, deg=True)
        ea, eb = _plain(a), _plain(b)
        if isinstance(ea, sp.MatrixBase) and isinstance(eb, sp.MatrixBase) and ea.shape[1] != eb.shape[0]:
            raise ParseError("matrix shapes")
        return Q(_check_size(ea * eb), approx)
    if op == "/":
        if (a.pct and b.pct) or (a.deg and b.deg):
            ea, eb = a.e, b.e
            pct = deg = False
        elif a.pct or a.deg:
            ea, eb = a.e, b.e
            pct, deg = a.pct, a.deg
        else:
            ea, eb = _plain(a), _plain(b)
            pct = deg = False
        if isinstance(eb, sp.MatrixBase):
            raise ParseError("division by a matrix")
        return Q(_check_size(ea / eb), approx, pct, deg)
    if op == "^":
        ea, eb = _plain(a), _plain(b)
        if isinstance(ea, sp.MatrixBase):
            if isinstance(eb, sp.Integer) and 0 <= int(eb) <= 64 and ea.is_square:
                return Q(ea ** int(eb), approx)
            raise ParseError("matrix power")
        return Q(safe_pow(ea, eb), approx)
    raise ParseError(op)


def neg(a):
    if isinstance(a, PM):
        return PM([neg(x) for x in a.alts])
    a = _q(a)
    return Q(-a.e, a.approx, a.pct, a.deg, a.written)


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


# --------------------------------------------------------------------------- parser


class Parser:
    def __init__(self, text: str, glued_units: bool = False):
        self.toks = tokenize(text, glued_units)
        self.unit_words: list[str] = []  # the unit words dropped after quantities
        self.i = 0
        self.depth = 0

    # token helpers
    @property
    def t(self) -> Tok:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Tok:
        t = self.toks[self.i]
        if t.kind != "end":
            self.i += 1
        return t

    def at(self, kind: str, val: str | None = None) -> bool:
        t = self.t
        return t.kind == kind and (val is None or t.val == val)

    def at_op(self, *vals: str) -> bool:
        return self.t.kind == "op" and self.t.val in vals

    def at_cmd(self, *vals: str) -> bool:
        return self.t.kind == "cmd" and self.t.val in vals

    def expect_op(self, v: str):
        if not self.at_op(v):
            raise ParseError(f"expected {v!r}")
        self.next()

    def enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooLarge("nesting too deep")

    def leave(self):
        self.depth -= 1

    def is_sep(self) -> bool:
        t = self.t
        if t.kind == "word" and t.val in SEP_WORDS:
            return True
        if t.kind == "text" and t.val.strip().lower() in SEP_WORDS | {",", "and also", ", and", ", or"}:
            return True
        return t.kind == "cmd" and t.val in ("text", "lor", "vee", "land", "wedge")

    def sep_kind(self) -> str:
        """'or' / 'and' for a logical connective here (word, \\text{ or }, \\lor, \\land), else ''."""
        t = self.t
        if t.kind == "cmd":
            return {"lor": "or", "vee": "or", "land": "and", "wedge": "and"}.get(t.val, "")
        if t.kind in ("word", "text"):
            w = t.val.strip().lower().lstrip(", ")
            return w if w in SEP_WORDS else "and" if w == "and also" else ""
        return ""

    # ---- top level
    def parse(self):
        groups: list[list] = []
        cur: list = []
        strong_seen = False
        logic: set[str] = set()  # the connectives between groups ('or', 'and', ';')
        while True:
            while self.at_op(".") :
                self.next()
            if self.at("end"):
                break
            if self.at_op(",") or self.is_sep() or self.at_op(";"):
                strong = not self.at_op(",")
                strong_seen = strong_seen or strong
                if strong:
                    logic.add(self.sep_kind() or ";")
                self.next()
                if strong and cur:
                    groups.append(cur)
                    cur = []
                continue
            cur.append(self.parse_rel())
            if not (self.at("end") or self.at_op(",", ";", ".") or self.is_sep()):
                raise ParseError(f"unexpected {self.t.val!r}")
        if cur:
            groups.append(cur)
        if not groups:
            raise ParseError("empty")
        if len(groups) == 1 and len(groups[0]) == 1:
            return groups[0][0]
        if len(logic) == 1 and logic <= SEP_WORDS and all(len(g) == 1 and is_condition(g[0]) for g in groups) and any(
                is_inequality(g[0]) for g in groups):
            # "x < -2 or x > 2": one condition, the union (or intersection) of the parts
            if len(groups) > MAX_ALTERNATIVES:
                raise TooLarge("too many alternatives")
            return Logic([g[0] for g in groups], next(iter(logic)))
        if logic <= {"or"} and len(groups) > 1 and all(len(g) == 1 and isinstance(g[0], SSet) for g in groups):
            vs = {g[0].var for g in groups}
            if len(vs) == 1 and None not in vs:  # x \\in (-oo, -2) or x \\in (2, oo): their union
                return SSet(sp.Union(*[g[0].s for g in groups]), vs.pop())
        if (len(groups) == 1 and 1 < len(groups[0]) <= MAX_ALTERNATIVES and all(is_inequality(x) for x in groups[0])
                and rel_var(Logic(groups[0], ",")) is not None):
            return Logic(groups[0], ",")  # x > 0, x \\ne 1: conditions on one unknown
        items: list = []
        for g in groups:
            if len(groups) > 1 and len(g) > 1 and all(
                isinstance(x, Rel) and x.ops == ["="] and name_like(x.parts[0]) for x in g
            ):
                items.append(Seq([x.parts[1] for x in g], "(", ")"))
            else:
                items.extend(g)
        return Seq(items, commas=not strong_seen and len(groups) == 1, alternatives="or" in logic)

    def parse_rel(self):
        parts = [self.parse_ratio()]
        ops: list[str] = []
        while True:
            t = self.t
            op = None
            if t.kind == "op" and t.val in ("=", "<", ">", "<=", ">=", "!="):
                op = t.val
            elif t.kind == "cmd" and t.val in REL_CMDS:
                op = REL_CMDS[t.val]
            if op is None or op == ";":
                break
            self.next()
            ops.append(op)
            parts.append(self.parse_ratio())
        if not ops:
            return parts[0]
        if "~" in ops:
            k = ops.index("~")
            if k == 0 and name_like(parts[0]):
                ops[0] = "="
            else:
                parts, ops = parts[: k + 1], ops[:k]
                if not ops:
                    return parts[0]
        if ops == ["in"]:
            inside = as_set(parts[1]) if isinstance(parts[1], (SSet, Seq)) else None  # not \\{1, 2\\}: a list
            if inside is not None and isinstance(parts[0], Q) and isinstance(parts[0].e, sp.Symbol):
                return SSet(inside, parts[0].e)  # x \\in S: the set S, remembering its variable
            return parts[1]
        if ops == ["notin"] and (outside := as_set(parts[1])) is not None:
            return SSet(sp.Complement(sp.S.Reals, outside))  # x \\notin [1, 2]: the complement
        if "in" in ops or "notin" in ops or "->" in ops:
            raise ParseError("unsupported relation")
        return Rel(parts, ops)

    def parse_ratio(self):
        items = [self.parse_setop()]
        two_digit = True
        while self.at_op(":") and not self.peek().kind == "end":
            self.next()
            t = self.t
            items.append(self.parse_setop())
            two_digit = two_digit and self.toks[self.i - 1] is t and t.kind == "num" and len(t.val) == 2
        if len(items) == 1:
            return items[0]
        return Ratio(items, clock=len(items) >= 3 and two_digit)

    def parse_setop(self):
        left = self.parse_add()
        while self.at_cmd("cup", "cap", "setminus", "backslash"):
            op = self.next().val
            right = self.parse_add()
            a, b = as_set(left), as_set(right)
            if a is None or b is None:
                raise ParseError("set operation on non-sets")
            left = SSet(sp.Union(a, b) if op == "cup" else sp.Intersection(a, b) if op == "cap" else sp.Complement(a, b))
        return left

    def parse_add(self):
        if self.at_op("+"):
            self.next()
        left = self.parse_mul()
        while True:
            if self.at_op("+", "-"):
                op = self.next().val
                if self.at_cmd("infty"):
                    pass
                right = self.parse_mul()
                left = binop(op, left, right)
            elif self.at_cmd("pm", "mp"):
                self.next()
                right = self.parse_mul()
                left = PM([binop("+", left, right), binop("-", left, right)])
            else:
                break
        return left

    def starts_atom(self) -> bool:
        t = self.t
        if t.kind in ("num", "id", "begin", "set"):
            return True
        if t.kind == "op" and t.val in ("(", "{", "\\{"):
            return True
        if t.kind == "word":
            return t.val in FUNCS or t.val in CONST_WORDS
        if t.kind == "cmd":
            return t.val in FUNCS or t.val in GREEK or t.val in (
                "frac", "dfrac", "tfrac", "cfrac", "sqrt", "pi", "infty", "binom", "dbinom", "tbinom", "lfloor",
                "lceil", "boxed", "exp", "ln", "log", "e", "imath", "ldots", "cdots", "dots", "varnothing",
                "emptyset", "partial", "nabla", "hbar", "ell",
            ) or t.val not in _NON_ATOM_CMDS
        return False

    def skip_units(self, left):
        """Drop unit words after a quantity (and a ^2 on them); handle percent/degree and multiplier words."""
        while True:
            t = self.t
            mult = _multiplier(t) if isinstance(left, Q) and not isinstance(left.e, sp.MatrixBase) else None
            if mult is not None:
                value, rest = mult
                self.next()
                left = Q(_check_size(left.e * value), left.approx, left.pct, left.deg)
                if rest:  # \text{ million dollars}: the words after the multiplier are units
                    self.unit_words.append(rest.lower().rstrip("."))
                    self.units_seen = True
                continue
            if t.kind == "op" and t.val == "%":
                self.next()
                left = _mark(left, pct=True)
            elif t.kind == "word" and t.val in PERCENT_WORDS:
                self.next()
                left = _mark(left, pct=True)
            elif t.kind == "word" and t.val in DEGREE_WORDS:
                self.next()
                left = _mark(left, deg=True)
            elif (t.kind == "word" and t.val not in FUNCS and t.val not in CONST_WORDS and t.val not in SEP_WORDS
                  and t.val.lower() not in HEDGE_WORDS) or (
                t.kind == "text" and _is_unit_text(t.val)
            ):
                txt = t.val.strip()
                if txt.lower() in PERCENT_WORDS | {"%"}:
                    self.next()
                    left = _mark(left, pct=True)
                    continue
                if txt.lower() in DEGREE_WORDS:
                    self.next()
                    left = _mark(left, deg=True)
                    continue
                if not isinstance(left, (Q, PM)):
                    break
                self.unit_words.append(self.next().val.strip().lower().rstrip("."))
                if self.at_op("^"):
                    self.next()
                    self.parse_exponent()
                if self.at_op("/") and self.peek().kind in ("word", "id") and self.peek().val not in FUNCS:
                    self.next()  # a compound unit: km/h, m/s after a unit word
                    self.next()
                self.units_seen = True
            else:
                break
        return left

    def parse_mul(self):
        left = self.parse_unary()
        while True:
            left = self.skip_units(left)
            if self.at_op("*") or self.at_cmd("cdot", "times", "ast"):
                self.next()
                left = binop("*", left, self.parse_unary())
            elif self.at_op("/") or self.at_cmd("div", "over"):
                self.next()
                left = binop("/", left, self.parse_unary())
            elif ((self.at_cmd("frac", "dfrac", "tfrac") or self.at("num") and self.t.space) and self._mixed_ok(left)
                  and (frac := self._try_mixed()) is not None):
                # mixed number: 2\frac{1}{4} or "2 1/4" = 2 + 1/4
                left = Q(left.e + frac if left.e >= 0 else left.e - frac)
            elif self.starts_atom():
                if self.at("num") and isinstance(left, Q) and self._last_was_num:
                    # "2 3" juxtaposed numbers: only with a power in between ("2^6 3^5")
                    if not self._allow_num_juxt:
                        raise ParseError("juxtaposed numbers")
                left = binop("*", left, self.parse_pow())
            else:
                break
        return left

    def _mixed_ok(self, left) -> bool:
        prev = self.toks[self.i - 1] if self.i else None
        return (isinstance(left, Q) and isinstance(left.e, sp.Integer) and not left.approx and not left.pct
                and self._last_was_num and not self._allow_num_juxt
                and prev is not None and prev.kind == "num" and "." not in prev.val)

    def _try_mixed(self):
        """A proper fraction of integer literals right here, or None (position restored)."""
        start = self.i
        try:
            if self.at("num"):
                a = self.next()
                if not self.at_op("/"):
                    raise ParseError("no")
                self.next()
                b = self.next()
                if a.kind != "num" or b.kind != "num" or "." in a.val + b.val:
                    raise ParseError("no")
                num, den = int(a.val), int(b.val)
            else:
                self.next()
                na, nb = self.read_arg(), self.read_arg()
                if not (isinstance(na, Q) and isinstance(nb, Q) and isinstance(na.e, sp.Integer)
                        and isinstance(nb.e, sp.Integer)) or na.approx or nb.approx:
                    raise ParseError("no")
                num, den = int(na.e), int(nb.e)
            if not 0 < num < den:
                raise ParseError("no")
            if self.at_op("^", "_") or self.starts_atom():
                raise ParseError("no")
            return sp.Rational(num, den)
        except ParseError:
            self.i = start
            return None

    _last_was_num = False
    _allow_num_juxt = False
    units_seen = False

    def parse_unary(self):
        if not (self.at_op("-", "+") or self.at_cmd("pm", "mp")):
            return self.parse_pow()
        self.enter()  # a prefix sign is a nesting level ("- - - - x")
        try:
            if self.at_op("-"):
                self.next()
                return neg(self.parse_unary())
            if self.at_op("+"):
                self.next()
                return self.parse_unary()
            self.next()
            v = self.parse_unary()
            return PM([v, neg(v)])
        finally:
            self.leave()

    def parse_exponent(self):
        self.enter()  # an exponent is a nesting level (towers "2^2^2^...")
        try:
            return self._exponent()
        finally:
            self.leave()

    def _exponent(self):
        if self.at_op("{"):
            self.next()
            if self.at_cmd("circ"):
                self.next()
                self.expect_op("}")
                return "deg"
            v = self.parse_inner("}")
            return v
        if self.at_cmd("circ"):
            self.next()
            return "deg"
        if self.at_op("-"):
            self.next()
            return neg(self.parse_exponent())
        if self.at("num"):
            t = self.t
            if not t.space and len(t.val) > 1 and t.val.isdigit() and self._latex_single:
                # x^23 in LaTeX means x^2 3; plain text means x^23: keep plain meaning
                pass
        return self.parse_unary() if self._plain_pow else self.parse_postfix(self.parse_atom())

    _plain_pow = True
    _latex_single = False

    def parse_pow(self):
        base = self.parse_postfix(self.parse_atom())
        was_num = self._atom_was_num
        if self.at_op("^"):
            self.next()
            if (st := self._set_power(base)) is not None:
                return st
            ex = self.parse_exponent()
            if ex == "deg":
                base = _mark(base, deg=True)
            else:
                base = binop("^", base, ex)
            base = self.parse_postfix(base)
            self._allow_num_juxt = True
        else:
            self._allow_num_juxt = False
        self._last_was_num = was_num
        return base

    _atom_was_num = False

    def _set_power(self, base):
        """After '^' on a set: R^+ / R^- (one sign), S^c / S^\\complement (complement in R); else None."""
        if not isinstance(base, (SSet, SetV, Seq)):
            return None
        braced = self.at_op("{")
        j = self.i + 1 if braced else self.i
        t = self.toks[j]
        close = self.toks[j + 1] if j + 1 < len(self.toks) else t
        if braced and not (close.kind == "op" and close.val == "}"):
            return None
        if t.kind == "op" and t.val in "+-*" and isinstance(base, SSet):
            out = SSet(_sign_restricted(base.s, "+" if t.val == "*" else t.val))
        elif (t.kind == "id" and t.val == "c") or (t.kind == "cmd" and t.val == "complement"):
            sb = as_set(base)
            if sb is None:
                return None
            out = SSet(sp.Complement(sp.S.Reals, sb))
        else:
            return None
        self.i = j + (2 if braced else 1)
        return out

    def _builder_ahead(self) -> bool:
        """After '\\{': a set-builder '\\{x | ...\\}', '\\{x : ...\\}', '\\{x \\in S \\mid ...\\}'?"""
        t, nxt = self.t, self.peek()
        if not (t.kind == "id" or (t.kind == "cmd" and t.val in GREEK)):
            return False
        return (nxt.kind == "cmd" and nxt.val in ("mid", "colon", "in")) or (nxt.kind == "op" and nxt.val in ("|", ":"))

    def parse_builder(self):
        """\\{x \\in D \\mid cond\\}: the solution set of the condition (in one variable) within D."""
        t = self.next()
        var = sp.Symbol(t.val if t.kind == "id" else t.val.replace("var", ""))
        dom = sp.S.Reals
        if self.at_cmd("in"):
            self.next()
            d = as_set(self.parse_setop())
            if d is None:
                raise ParseError("set-builder domain")
            dom = d
        if not (self.at_cmd("mid", "colon") or self.at_op("|", ":")):
            raise ParseError("set-builder")
        self.next()
        union = None
        cur = None
        conditions = 0
        while True:
            conditions += 1
            if conditions > MAX_ALTERNATIVES:
                raise TooLarge("too many conditions")
            r = self.parse_rel()
            st = rel_to_set(r, var, allow_eq=True) if isinstance(r, Rel) else as_set(r)
            if st is None:
                raise ParseError("set-builder condition")
            cur = st if cur is None else sp.Intersection(cur, st)
            kind = "and" if self.at_op(",") else self.sep_kind()
            if kind:
                self.next()
            if kind == "and":
                continue
            union = cur if union is None else sp.Union(union, cur)
            cur = None
            if kind != "or":
                break
        self.expect_op("\\}")
        return SSet(sp.Intersection(dom, union), builder=True)

    def parse_postfix(self, v):
        while True:
            if self.at_op("!") and not self.peek().val == "=":
                self.next()
                q = _q(v)
                e = q.e
                if isinstance(e, sp.Integer):
                    if not 0 <= int(e) <= MAX_FACTORIAL:
                        raise TooLarge("factorial too large")
                    v = Q(sp.factorial(e), q.approx)
                elif isinstance(e, sp.Number):
                    raise ParseError("factorial of a non-integer")
                else:
                    v = Q(sp.factorial(e), q.approx)
            elif self.at_op("'"):
                self.next()
                q = _q(v)
                if isinstance(q.e, sp.Symbol):
                    v = Q(sp.Symbol(q.e.name + "'"))
                else:
                    raise ParseError("prime on expression")
            elif self.at_op("%"):
                self.next()
                v = _mark(v, pct=True)
            elif self.at_op("_") :
                self.next()
                sub = self.read_raw_arg()
                q = _q(v)
                if isinstance(q.e, sp.Symbol):
                    v = Q(sp.Symbol(f"{q.e.name}_{sub}"))
                elif isinstance(q.e, sp.Integer) and re.fullmatch(r"\d+", sub):
                    v = Q(sp.Symbol(f"{q.e}_{sub}"))
                else:
                    raise ParseError("subscript")
            else:
                return v

    def read_raw_arg(self) -> str:
        """A subscript: a braced group or one token, as normalised raw text."""
        if self.at_op("{"):
            self.next()
            parts = []
            depth = 1
            while True:
                t = self.next()
                if t.kind == "end":
                    raise ParseError("unbalanced subscript")
                if t.kind == "op" and t.val == "{":
                    depth += 1
                elif t.kind == "op" and t.val == "}":
                    depth -= 1
                    if depth == 0:
                        break
                parts.append(t.val)
            return "".join(parts)
        t = self.next()
        if t.kind == "num":
            if len(t.val) > 1 and t.val.isdigit() and not self._plain_pow:
                # LaTeX: x_12 is x_1 2
                rest = t.val[1:]
                self.i -= 1
                self.toks[self.i] = Tok("num", rest)
                return t.val[0]
            return t.val
        if t.kind in ("id", "cmd", "word"):
            return t.val
        raise ParseError("bad subscript")

    def parse_inner(self, close: str):
        v = self.parse_list_until((close,))
        self.next()
        if isinstance(v, Seq) and v.open == "":
            return v
        return v

    def parse_list_until(self, closes: tuple[str, ...]):
        """Comma-separated items up to (not consuming) one of `closes`."""
        items = []
        while True:
            if self.at("end"):
                raise ParseError("unclosed bracket")
            if self.at_op(*closes):
                break
            items.append(self.parse_rel())
            if self.at_op(",", ";"):
                self.next()
                continue
            if self.is_sep():
                self.next()
                continue
            if not self.at_op(*closes):
                raise ParseError(f"unexpected {self.t.val!r} in brackets")
        if len(items) == 1:
            return items[0]
        return Seq(items)

    def read_arg(self):
        """A LaTeX macro argument: {group} or a single token (\\frac12)."""
        if self.at_op("{"):
            self.next()
            return self.parse_inner("}")
        t = self.t
        if t.kind == "num" and len(t.val) > 1 and t.val[0].isdigit():
            self.toks[self.i] = Tok("num", t.val[1:])
            return Q(sp.Integer(int(t.val[0])))
        if t.kind == "op" and t.val == "(":
            return self.parse_atom()
        if t.kind == "op" and t.val in ("-", "+"):
            raise ParseError("bad macro argument")
        return self.parse_atom()

    def parse_func(self, name: str):
        power = None
        base = None
        if self.at_op("^"):
            self.next()
            power = self.parse_exponent()
        if self.at_op("_"):
            self.next()
            base = self.read_arg() if self.at_op("{") else self.parse_atom()
        if self.at_op("^") and power is None:
            self.next()
            power = self.parse_exponent()
        if self.at_op("("):
            arg = self.parse_atom()
        elif self.at_op("{"):
            arg = self.read_arg()
        else:
            arg = self.parse_pow()
            while self.starts_atom() and not (self.t.kind in ("cmd", "word") and self.t.val in FUNCS):
                arg = binop("*", arg, self.parse_pow())
        if isinstance(arg, PM):
            return PM([self._apply(name, a, base, power) for a in arg.alts])
        return self._apply(name, arg, base, power)

    def _apply(self, name, arg, base, power):
        q = _q(arg)
        if isinstance(q.e, sp.MatrixBase):
            raise ParseError("function of a matrix")
        if name in TRIG:
            x = _to_rad(q) if not q.pct else q.e / 100
            if isinstance(power, Q) and power.e == -1:
                return Q(INVERSE[name if name != "cosec" else "csc"](x), q.approx)
            out = Q(FUNCS[name](x), q.approx)
        elif name in ("log", "lg"):
            x = _plain(q)
            if base is not None:
                out = Q(sp.log(x, _plain(_q(base))), q.approx)
            elif name == "lg":
                out = Q(sp.log(x, 10), q.approx)
            else:
                out = Q(sp.log(x), q.approx)
        else:
            out = Q(FUNCS[name](_plain(q)), q.approx)
        if power is not None and power != "deg":
            out = binop("^", out, power)
        return out

    def parse_atom(self):
        t = self.t
        if t.kind in ("num", "id", "text", "set") or (t.kind == "word" and t.val not in FUNCS):
            return self._atom()  # a leaf: no nesting level
        self.enter()
        try:
            return self._atom()
        finally:
            self.leave()

    def _atom(self):
        t = self.next()
        self._atom_was_num = t.kind == "num"
        k, v = t.kind, t.val
        if k == "num":
            if "e" in v.lower():
                mant, _, ex = v.lower().partition("e")
                if abs(int(ex)) > 400:
                    raise TooLarge("exponent too large")
                return Q(_check_size(sp.Rational(mant) * sp.Integer(10) ** int(ex)), approx=True)
            if "." not in v:
                return Q(sp.Rational(v))
            digits = v.replace(".", "").lstrip("0")
            return Q(sp.Rational(v), approx=True, written=(len(v) - v.index(".") - 1, len(digits)))
        if k == "id":
            if v in FUNC_LETTERS and self.at_op("(") and not self.t.space:
                self.next()
                args = self.parse_list_until((")",))
                self.next()
                argl = args.items if isinstance(args, Seq) else [args]
                # P(\\text{red}): a word argument is a name
                return Q(sp.Function(v)(*[sp.Symbol(a.s) if isinstance(a, Text) else _plain(_q(a)) for a in argl]))
            if v == "e":
                return Q(sp.E)
            if v in ("i", "I"):
                return Q(sp.I)
            return Q(sp.Symbol(v))
        if k == "word":
            if v in CONST_WORDS:
                return Q(CONST_WORDS[v])
            if v in FUNCS:
                if v == "sqrt" and self.at_op("("):
                    return self.parse_func("sqrt")
                return self.parse_func(v)
            if v in PERCENT_WORDS or v in DEGREE_WORDS or v in SEP_WORDS:
                raise ParseError("stray word")
            return Text(v)
        if k == "text":
            txt = v.strip()
            m = re.fullmatch(r"([-+]?(?:\d+(?:\.\d+)?|\.\d+))(?:\s+([A-Za-z]+))?", txt)
            if m and (m.group(2) is None or m.group(2).lower() in MULTIPLIERS):
                scale = MULTIPLIERS[m.group(2).lower()] if m.group(2) else 1
                return Q(sp.Rational(m.group(1)) * scale, approx="." in txt)  # \\text{12}, \\text{2 million}
            if not txt:
                raise ParseError("empty text")
            return Text(txt)
        if k == "op":
            if v == "(" or v == "[":
                items = self.parse_list_until((")", "]"))
                close = self.next().val
                if isinstance(items, Seq) and items.open == "":
                    return Seq(items.items, v, close)
                return items
            if v == "{":
                items = self.parse_list_until(("}",))
                self.next()
                if isinstance(items, Seq) and items.open == "":
                    return Seq(items.items, "{", "}")
                return items
            if v == "\\{":
                if self.at_op("\\}"):
                    self.next()
                    return SSet(sp.S.EmptySet)
                if self._builder_ahead():
                    return self.parse_builder()
                items = self.parse_list_until(("\\}",))
                self.next()
                its = items.items if isinstance(items, Seq) and items.open == "" else [items]
                return SetV(its)
            if v == "|":
                inner = self.parse_add()
                self.expect_op("|")
                q = _q(inner)
                return Q(sp.Abs(_plain(q)), q.approx)
            raise ParseError(f"unexpected {v!r}")
        if k == "set":
            return SSet(NUMSETS[v])
        if k == "cmd":
            return self._cmd(v)
        if k == "begin":
            return self.parse_env(v)
        raise ParseError("unexpected end")

    def _cmd(self, v: str):
        if v in ("frac", "dfrac", "tfrac", "cfrac"):
            a = self.read_arg()
            b = self.read_arg()
            return binop("/", a, b)
        if v in ("binom", "dbinom", "tbinom"):
            a = _q(self.read_arg())
            b = _q(self.read_arg())
            if isinstance(a.e, sp.Integer) and int(a.e) > MAX_FACTORIAL:
                raise TooLarge("binomial too large")
            return Q(sp.binomial(a.e, b.e))
        if v == "sqrt":
            idx = None
            if self.at_op("["):
                self.next()
                idx = self.parse_add()
                self.expect_op("]")
            arg = self.read_arg()
            if idx is None:
                if isinstance(arg, PM):
                    return PM([Q(sp.sqrt(_plain(_q(a))), _q(a).approx) for a in arg.alts])
                q = _q(arg)
                return Q(sp.sqrt(_plain(q)), q.approx)
            return binop("^", arg, binop("/", Q(sp.Integer(1)), idx))
        if v in FUNCS:
            return self.parse_func(v)
        if v == "pi":
            return Q(sp.pi)
        if v == "infty" or v == "infin":
            return Q(sp.oo)
        if v in ("e",):
            return Q(sp.E)
        if v in ("imath",):
            return Q(sp.I)
        if v in GREEK:
            return Q(sp.Symbol(v.replace("var", "")))
        if v == "boxed" or v == "fbox":
            return self.read_arg()
        if v in ("lfloor", "lceil"):
            inner = self.parse_add()
            if not self.at_cmd("rfloor", "rceil"):
                raise ParseError("unclosed floor")
            self.next()
            q = _q(inner)
            return Q((sp.floor if v == "lfloor" else sp.ceiling)(_plain(q)), q.approx)
        if v in ("ldots", "cdots", "dots"):
            return Q(sp.Symbol("..."))
        if v in ("varnothing", "emptyset"):
            return SSet(sp.S.EmptySet)
        if v == "complement":  # \\complement_{U} A
            universe = sp.S.Reals
            if self.at_op("_"):
                self.next()
                universe = as_set(self.read_arg())
            sb = as_set(self.parse_pow())
            if universe is None or sb is None:
                raise ParseError("complement of a non-set")
            return SSet(sp.Complement(universe, sb))
        if v in ("mathbb", "mathcal", "vec", "overline", "overrightarrow", "hat", "bar"):
            return self.read_arg()
        if v in _NON_ATOM_CMDS:
            raise ParseError(f"unexpected \\{v}")
        return Q(sp.Symbol(v))

    def parse_env(self, env: str):
        if env in ("pmatrix", "bmatrix", "matrix", "vmatrix", "Bmatrix", "smallmatrix", "array", "Vmatrix"):
            rows: list[list] = [[]]
            cells = 0
            while True:
                t = self.t
                if t.kind == "endenv":
                    break
                if t.kind == "end":
                    raise ParseError("unclosed matrix")
                if t.kind == "op" and t.val == "\\\\":
                    self.next()
                    rows.append([])
                    continue
                if t.kind == "op" and t.val == "&":
                    self.next()
                    continue
                rows[-1].append(self.parse_add())
                cells += 1
                if cells > MAX_CELLS:
                    raise TooLarge("matrix too large")
            self.next()
            rows = [r for r in rows if r]
            if not rows or len({len(r) for r in rows}) != 1:
                raise ParseError("ragged matrix")
            approx = any(_q(c).approx for r in rows for c in r)
            return Q(sp.Matrix([[_plain(_q(c)) for c in r] for r in rows]), approx)
        if env in ("cases", "aligned", "align", "gathered", "gather", "eqnarray", "split"):
            items = []
            while not self.at("endenv"):
                if self.t.kind == "end":
                    raise ParseError("unclosed environment")
                if self.at_op("\\\\", "&", ",", ";"):
                    self.next()
                    continue
                items.append(self.parse_rel())
            self.next()
            return Seq(items)
        raise ParseError(f"unknown environment {env}")


_NON_ATOM_CMDS = {
    "cdot", "times", "div", "pm", "mp", "cup", "cap", "setminus", "circ", "over", "ast", "rfloor", "rceil",
    "quad", "qquad", "end", "right", "left", "backslash", "mid", "colon", "implies", "iff", "lor", "vee", "land",
    "wedge", "complement",
} | set(REL_CMDS)


def _multiplier(t: Tok) -> tuple[int, str] | None:
    """A multiplier word token ("million"), or a unit text that starts with one ("\\text{ million people}"):
    (its value, the words after it); else None."""
    if t.kind == "word":
        v = MULTIPLIERS.get(t.val.lower())
        return None if v is None else (v, "")
    if t.kind == "text" and _is_unit_text(t.val):
        first, _, rest = t.val.strip().partition(" ")
        v = MULTIPLIERS.get(first.lower().rstrip("."))
        return None if v is None else (v, rest.strip())
    return None


def _is_unit_text(s: str) -> bool:
    s = s.strip()
    if not s:
        return False
    if not re.fullmatch(r"[A-Za-z][A-Za-z .²³/]*(\^?\{?[23]\}?)?\.?", s) or s.lower() in SEP_WORDS:
        return False
    return not any(w in HEDGE_WORDS for w in re.findall(r"[a-z]+", s.lower()))


def _mark(v, pct: bool = False, deg: bool = False):
    if isinstance(v, PM):
        return PM([_mark(a, pct, deg) for a in v.alts])
    if isinstance(v, Seq):
        return Seq([_mark(a, pct, deg) for a in v.items], v.open, v.close, v.commas)
    q = _q(v)
    return Q(q.e, q.approx, q.pct or pct, q.deg or deg)


def as_set(v):
    """A value seen as a SymPy set (intervals, \\{..\\}, unions), or None."""
    if isinstance(v, SSet):
        return v.s
    if isinstance(v, SetV):
        vals = []
        for it in v.items:
            if isinstance(it, PM):
                vals.extend(_plain(_q(a)) for a in it.alts)
            elif isinstance(it, Q) and not isinstance(it.e, sp.MatrixBase):
                vals.append(_plain(it))
            else:
                return None
        return sp.FiniteSet(*vals)
    if isinstance(v, Seq) and len(v.items) == 2 and v.open in "([" and v.close in ")]" and v.open:
        a, b = v.items
        if not (isinstance(a, Q) and isinstance(b, Q)):
            return None
        lo, hi = _plain(a), _plain(b)
        if not (getattr(lo, "is_real", False) or lo in (sp.oo, -sp.oo)) or not (
            getattr(hi, "is_real", False) or hi in (sp.oo, -sp.oo)
        ):
            return None
        try:
            return sp.Interval(lo, hi, v.open == "(", v.close == ")")
        except Exception:  # noqa: BLE001
            return None
    if isinstance(v, PM):
        return sp.FiniteSet(*[_plain(_q(a)) for a in v.alts])
    return None


INEQ_OPS = {"<", ">", "<=", ">=", "!="}


def is_inequality(v) -> bool:
    return isinstance(v, Rel) and bool(v.ops) and all(op in INEQ_OPS for op in v.ops)


def is_condition(v) -> bool:
    """An inequality or an equation: a part of 'x < 0 or x = 1' (a union with a point)."""
    return isinstance(v, Rel) and bool(v.ops) and all(op in INEQ_OPS or op == "=" for op in v.ops)


def rel_to_set(r, var=None, allow_eq: bool = False):
    """The real solution set of an inequality (chain) in one variable, or of inequalities joined by
    or/and (`Logic`); None when it is not one (several variables, undefined functions, no relation).
    `var`: the variable of a set-builder (`\\{x | x > 2\\}`); `allow_eq`: '=' is a condition too."""
    if isinstance(r, Logic):
        if var is None and rel_var(r) is None:
            return None  # "x < -2 or y > 2" is not a condition on one unknown
        sets = [rel_to_set(x, var, allow_eq or r.op != ",") for x in r.rels]
        if any(x is None for x in sets):
            return None
        if r.op == "or":
            return sp.Union(*sets)
        both = sp.Intersection(*sets)
        # a comma list whose conditions exclude each other ("x < -2, x > 2") lists alternatives
        return sp.Union(*sets) if r.op == "," and both is sp.S.EmptySet else both
    ops_ok = INEQ_OPS | ({"="} if allow_eq else set())
    if not isinstance(r, Rel) or not r.ops or not all(op in ops_ok for op in r.ops):
        return None
    parts = r.parts
    if len(parts) == 2 and r.ops[0] in ("!=", "=") and isinstance(parts[1], PM):
        # x \\ne \\pm 1: every value but those; x = \\pm 1 (a condition): those values
        pts = _pm_points(parts[1])
        v0 = rel_var(Rel([parts[0], Q(sp.Integer(0))], ["="]), var)
        if pts is None or v0 is None or not (isinstance(parts[0], Q) and parts[0].e == v0):
            return None
        return sp.Complement(sp.S.Reals, pts) if r.ops[0] == "!=" else pts
    var_expr = rel_var(r, var)
    if var_expr is None or not all(isinstance(p, Q) for p in parts):
        return None
    if any(_hard_to_solve(_plain(p), var_expr) for p in parts):
        return None
    t = sp.Dummy("t", real=True)
    out = sp.S.Reals
    rels = {"<": sp.Lt, ">": sp.Gt, "<=": sp.Le, ">=": sp.Ge, "!=": sp.Ne, "=": sp.Eq}
    for (a, b), op in zip(zip(parts, parts[1:], strict=False), r.ops, strict=True):
        la, lb = _plain(a).subs(var_expr, t), _plain(b).subs(var_expr, t)
        rel = rels[op](la, lb)
        if rel is sp.true or rel is sp.false:
            if not ({la, lb} & {sp.oo, -sp.oo}):
                return None  # 2 < 3: no condition
            out = out if rel is sp.true else sp.S.EmptySet  # -oo < x < -2: the infinite end is no bound
            continue
        out = sp.Intersection(out, sp.solveset(rel, t, sp.S.Reals))
    return out


def _pm_points(v):
    """The real numbers of a +- value (`\\pm 1`), or None."""
    pts = []
    for a in v.alts:
        e = _plain(a) if isinstance(a, Q) else None
        if not isinstance(e, sp.Basic) or e.free_symbols or not e.is_real:
            return None
        pts.append(e)
    return sp.FiniteSet(*pts)


def rel_var(r, var=None):
    """The one unknown of a relation chain (or of all the parts of a `Logic`): its only symbol, or
    the one name-like side it constrains (`f(x) > 2`); None when there is none or several."""
    if isinstance(r, Logic):
        vs = {rel_var(x, var) for x in r.rels}
        return next(iter(vs)) if len(vs) == 1 else None
    if not isinstance(r, Rel):
        return None
    parts = [p for p in r.parts if not (isinstance(p, PM) and _pm_points(p) is not None)]
    if not all(isinstance(p, Q) and isinstance(p.e, sp.Basic) for p in parts):
        return None
    nonnum = [p for p in parts if p.e.free_symbols]
    syms = set().union(*(p.e.free_symbols for p in parts))
    has_undef = any(p.e.atoms(AppliedUndef) for p in parts)
    if var is not None:
        return var if not has_undef and syms <= {var} else None
    if len(syms) == 1 and not has_undef:
        return next(iter(syms))
    if nonnum and all(name_like(p) and p.e == nonnum[0].e for p in nonnum):
        return nonnum[0].e
    return None


MAX_SOLVE_DEGREE = 6
MAX_SOLVE_OPS = 40


def _hard_to_solve(e, var) -> bool:
    """Inequalities SymPy cannot solve quickly (x^100 - 3x + 1 > 0): left unsolved rather than timed out."""
    if not isinstance(e, sp.Basic) or sp.count_ops(e) > MAX_SOLVE_OPS:
        return True
    return any(p.base.has(var) and p.exp.is_Number and abs(p.exp) > MAX_SOLVE_DEGREE for p in e.atoms(sp.Pow))


def _sign_restricted(s, sign: str):
    """R^+, Z^-, Q^+ ...: the set's positive (or negative) part."""
    half = sp.Interval.open(0, sp.oo) if sign == "+" else sp.Interval.open(-sp.oo, 0)
    if s == sp.S.Integers:
        return sp.S.Naturals if sign == "+" else sp.Range(-sp.oo, 0)
    if s == sp.S.Naturals:
        return s if sign == "+" else sp.S.EmptySet
    return sp.Intersection(s, half)


def set_difference(a, b):
    """A \\setminus B, A - B for sets (None when either side is not a set)."""
    sa, sb = as_set(a), as_set(b)
    if sa is None or sb is None:
        return None
    return SSet(sp.Complement(sa, sb))


def parse(text: str, plain: bool | None = None, glued_units: bool = False, units_out: list | None = None):
    """Parse one answer string into a value (Q, Rel, Seq, SetV, SSet, Ratio, Text, PM).
    glued_units: read '10cm' as 10 with a unit (completions); units_out collects the unit words dropped."""
    p = Parser(text, glued_units)
    if plain is None:
        plain = "\\" not in text
    p._plain_pow = plain
    v = p.parse()
    if units_out is not None:
        units_out.extend(p.unit_words)
    return v
