"""The tokenizer: LaTeX / plain text -> tokens, and the vocabulary it reads (commands, functions, words)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import sympy as sp

from .values import MAX_TOKENS, ParseError, TooLarge

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
    return _Lexer(s, glued_units).run()


class _Lexer:
    """One pass over the text. `space` records whitespace before the next token; a skipped command
    (\\left, \\quad, \\tag{..}) keeps it, as does a command that rewrites the text ahead (\\SI, \\mathrm{x})."""

    def __init__(self, s: str, glued_units: bool) -> None:
        self.s, self.n, self.i = s, len(s), 0
        self.glued_units = glued_units
        self.toks: list[Tok] = []
        self.space = False

    def add(self, kind: str, val: str) -> None:
        self.toks.append(Tok(kind, val, self.space))

    def splice(self, text: str) -> None:
        """Put text back in front of the position (a command's argument to be read as ordinary input)."""
        self.s = self.s[: self.i] + text + self.s[self.i :]
        self.n = len(self.s)

    def run(self) -> list[Tok]:
        while self.i < self.n:
            if len(self.toks) > MAX_TOKENS:
                raise TooLarge("too many tokens")
            c = self.s[self.i]
            if c.isspace() or c == "~":
                self.space = True
                self.i += 1
                continue
            if c.isdigit() or (c == "." and self.i + 1 < self.n and self.s[self.i + 1].isdigit()):
                m = _num_re.match(self.s, self.i)
                assert m
                self.add("num", m.group(0))
                self.i = m.end()
            elif c.isalpha() and c.isascii():
                self.word()
            elif c == "\\":
                if not self.backslash():
                    continue
            else:
                self.symbol(c)
            self.space = False
        self.add("end", "")
        return self.toks

    def word(self) -> None:
        s, i, n = self.s, self.i, self.n
        j = i
        while j < n and s[j].isalpha() and s[j].isascii():
            j += 1
        w = s[i:j]
        prev_num = bool(self.toks) and self.toks[-1].kind == "num"
        if self.glued_units and prev_num and not self.space and w in GLUED_UNITS:
            self.add("word", w)  # 10cm, 5kg: a unit, not c*m
        elif len(w) == 1:
            self.add("id", w)
        elif w in FUNCS or w in CONST_WORDS or w in SEP_WORDS or w in PERCENT_WORDS or w in DEGREE_WORDS:
            self.add("word", w)
        elif len(w) >= 3 or (self.space and prev_num):
            self.add("word", w)
        else:
            for ch in w:
                self.add("id", ch)
                self.space = False
        self.i = j

    def backslash(self) -> bool:
        """A backslash sequence at the position; False where it leaves the pending space as it was."""
        s, i, n = self.s, self.i, self.n
        if i + 1 >= n:
            self.i += 1
            return False
        d = s[i + 1]
        if d.isalpha():
            j = i + 1
            while j < n and s[j].isalpha():
                j += 1
            self.i = j
            return self.command(s[i + 1 : j])
        if d == "\\":
            self.add("op", "\\\\")
        elif d in "{}|%$#&_":
            v = {"{": "\\{", "}": "\\}", "|": "|", "%": "%", "$": "", "#": "", "&": "&", "_": "_"}[d]
            if v:
                self.add("op", v)
        # else spacing like "\\," "\\!" "\\ " "\\;": nothing
        self.i += 2
        return True

    def command(self, name: str) -> bool:
        """\\name read, the position after it; False where the pending space stays."""
        s, n = self.s, self.n
        if name in ("mathbb", "Bbb") and (m := _NUMSET_ARG.match(s, self.i)):
            self.add("set", m.group(1) or m.group(2))  # \\mathbb{R}: a number set
            self.i = m.end()
            return True
        if name in NUMSET_CMDS:
            self.add("set", NUMSET_CMDS[name])
            return True
        if name in SKIP_CMDS:
            self.skip_command(name)
            return False
        if name in SIUNITX and self.i < n and s[self.i] == "{":
            self.siunitx(name)
            return False
        if name in TEXT_CMDS or name in STYLE_CMDS:
            return self.text_command(name)
        if name == "begin" or name == "end":
            if self.i < n and s[self.i] == "{":
                env, self.i = _read_group(s, self.i)
            else:
                raise ParseError("bad environment")
            if name == "begin" and env.strip() == "array" and self.i < n and s[self.i] == "{":
                _, self.i = _read_group(s, self.i)
            self.add("begin" if name == "begin" else "endenv", env.strip().rstrip("*"))
        elif name in ("langle", "rangle"):
            self.add("op", "(" if name == "langle" else ")")  # a vector <1, 2>
        else:
            self.add("cmd", CMD_ALIASES.get(name, name))
        return True

    def skip_command(self, name: str) -> None:
        s, n = self.s, self.n
        if name in ("left", "right") and self.i < n and s[self.i] == ".":
            self.i += 1
        if name in ("hspace", "vspace") and self.i < n and s[self.i] == "*":
            self.i += 1
        if name in ("tag", "phantom", "hspace", "vspace", "hphantom", "vphantom") and self.i < n and s[self.i] == "{":
            _, self.i = _read_group(s, self.i)

    def siunitx(self, name: str) -> None:
        """\\num{4096}, \\SI{10}{cm}, \\qty{10}{\\centi\\metre}, \\si{cm}: the number and a \\text unit."""
        first, self.i = _read_group(self.s, self.i)
        unit = ""
        if name in ("SI", "qty") and self.i < self.n and self.s[self.i] == "{":
            unit, self.i = _read_group(self.s, self.i)
        elif name in ("si", "unit"):
            first, unit = "", first
        unit = re.sub(r"[\\{}]", " ", unit).strip()
        self.splice(" " + first + (" \\text{" + unit + "} " if unit else " "))

    def text_command(self, name: str) -> bool:
        """\\text{..} and the style commands: a text token; a styled single letter or non-word is put back
        into the input (\\mathrm{d}, \\mathbf{x+1}), keeping the pending space."""
        s, n = self.s, self.n
        while self.i < n and s[self.i] == " ":
            self.i += 1
        if self.i < n and s[self.i] == "{":
            content, self.i = _read_group(s, self.i)
        else:
            content = s[self.i : self.i + 1]
            self.i += 1
        if name in STYLE_CMDS and (len(content.strip()) <= 1 or not re.fullmatch(r"\s*[A-Za-z]+\s*", content)):
            self.splice(" " + content + " ")
            return False
        self.add("text", content)
        return True

    def symbol(self, c: str) -> None:
        two = self.s[self.i : self.i + 2]
        if two in ("<=", ">=", "!=", "==", "**", "=<", "=>"):
            self.add("op", {"**": "^", "==": "=", "=<": "<=", "=>": ">="}.get(two, two))
            self.i += 2
        elif c in "+-*/^_()[]{},;:=<>!|&'%":
            self.add("op", c)
            self.i += 1
        elif c in "$":
            self.i += 1
        elif c in "?\"`" or c == "." or c in "€£¥" or not c.isascii():
            # punctuation and non-ASCII noise: sentence ends, currency, quotes
            if c == ".":
                self.add("op", ".")
            self.i += 1
        else:
            raise ParseError(f"unexpected character {c!r}")
