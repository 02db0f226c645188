"""A LaTeX / plain-text math parser that builds SymPy objects directly.

No string is ever handed to ``sympify``/``parse_expr``/``eval``: a tokenizer and a
recursive-descent (precedence climbing) grammar build SymPy objects node by node, with
size guards on exponents, factorials, nesting depth and token counts. Anything the
grammar does not know is either a symbol, a word (unit or text answer) or a parse error.
"""

from __future__ import annotations

import re

import sympy as sp

from .arith import binop, check_size, neg
from .lexer import (
    CONST_WORDS,
    DEGREE_WORDS,
    FUNC_LETTERS,
    FUNCS,
    GREEK,
    HEDGE_WORDS,
    INVERSE,
    MULTIPLIERS,
    NUMSETS,
    PERCENT_WORDS,
    REL_CMDS,
    SEP_WORDS,
    TRIG,
    Tok,
    tokenize,
)
from .sets import as_set, is_condition, is_inequality, rel_to_set, rel_var, sign_restricted
from .values import (
    MAX_ALTERNATIVES,
    MAX_CELLS,
    MAX_DEPTH,
    MAX_FACTORIAL,
    PM,
    Logic,
    ParseError,
    Q,
    Ratio,
    Rel,
    Seq,
    SetV,
    SSet,
    Text,
    TooLarge,
    as_quantity,
    marked,
    name_like,
    plain_value,
    radians,
)


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
                left = Q(check_size(left.e * value), left.approx, left.pct, left.deg)
                if rest:  # \text{ million dollars}: the words after the multiplier are units
                    self.unit_words.append(rest.lower().rstrip("."))
                    self.units_seen = True
                continue
            if t.kind == "op" and t.val == "%":
                self.next()
                left = marked(left, pct=True)
            elif t.kind == "word" and t.val in PERCENT_WORDS:
                self.next()
                left = marked(left, pct=True)
            elif t.kind == "word" and t.val in DEGREE_WORDS:
                self.next()
                left = marked(left, deg=True)
            elif (t.kind == "word" and t.val not in FUNCS and t.val not in CONST_WORDS and t.val not in SEP_WORDS
                  and t.val.lower() not in HEDGE_WORDS) or (
                t.kind == "text" and _is_unit_text(t.val)
            ):
                txt = t.val.strip()
                if txt.lower() in PERCENT_WORDS | {"%"}:
                    self.next()
                    left = marked(left, pct=True)
                    continue
                if txt.lower() in DEGREE_WORDS:
                    self.next()
                    left = marked(left, deg=True)
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
                base = marked(base, deg=True)
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
            out = SSet(sign_restricted(base.s, "+" if t.val == "*" else t.val))
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
                q = as_quantity(v)
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
                q = as_quantity(v)
                if isinstance(q.e, sp.Symbol):
                    v = Q(sp.Symbol(q.e.name + "'"))
                else:
                    raise ParseError("prime on expression")
            elif self.at_op("%"):
                self.next()
                v = marked(v, pct=True)
            elif self.at_op("_") :
                self.next()
                sub = self.read_raw_arg()
                q = as_quantity(v)
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
        q = as_quantity(arg)
        if isinstance(q.e, sp.MatrixBase):
            raise ParseError("function of a matrix")
        if name in TRIG:
            x = radians(q) if not q.pct else q.e / 100
            if isinstance(power, Q) and power.e == -1:
                return Q(INVERSE[name if name != "cosec" else "csc"](x), q.approx)
            out = Q(FUNCS[name](x), q.approx)
        elif name in ("log", "lg"):
            x = plain_value(q)
            if base is not None:
                out = Q(sp.log(x, plain_value(as_quantity(base))), q.approx)
            elif name == "lg":
                out = Q(sp.log(x, 10), q.approx)
            else:
                out = Q(sp.log(x), q.approx)
        else:
            out = Q(FUNCS[name](plain_value(q)), q.approx)
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
            return self._number(v)
        if k == "id":
            return self._letter(v)
        if k == "word":
            return self._word(v)
        if k == "text":
            return self._text(v)
        if k == "op":
            return self._bracket(v)
        if k == "set":
            return SSet(NUMSETS[v])
        if k == "cmd":
            return self._cmd(v)
        if k == "begin":
            return self.parse_env(v)
        raise ParseError("unexpected end")

    def _number(self, v: str) -> Q:
        """A numeral: exact integer or rational; a decimal or e-notation marked approximate."""
        if "e" in v.lower():
            mant, _, ex = v.lower().partition("e")
            if abs(int(ex)) > 400:
                raise TooLarge("exponent too large")
            return Q(check_size(sp.Rational(mant) * sp.Integer(10) ** int(ex)), approx=True)
        if "." not in v:
            return Q(sp.Rational(v))
        digits = v.replace(".", "").lstrip("0")
        return Q(sp.Rational(v), approx=True, written=(len(v) - v.index(".") - 1, len(digits)))

    def _letter(self, v: str):
        """A one-letter name: a function letter applied (f(x)), e, i, or a symbol."""
        if v in FUNC_LETTERS and self.at_op("(") and not self.t.space:
            self.next()
            args = self.parse_list_until((")",))
            self.next()
            argl = args.items if isinstance(args, Seq) else [args]
            # P(\\text{red}): a word argument is a name
            return Q(sp.Function(v)(*[sp.Symbol(a.s) if isinstance(a, Text) else plain_value(as_quantity(a)) for a in argl]))
        if v == "e":
            return Q(sp.E)
        if v in ("i", "I"):
            return Q(sp.I)
        return Q(sp.Symbol(v))

    def _word(self, v: str):
        """A word: a constant, a function name, or a text answer."""
        if v in CONST_WORDS:
            return Q(CONST_WORDS[v])
        if v in FUNCS:
            if v == "sqrt" and self.at_op("("):
                return self.parse_func("sqrt")
            return self.parse_func(v)
        if v in PERCENT_WORDS or v in DEGREE_WORDS or v in SEP_WORDS:
            raise ParseError("stray word")
        return Text(v)

    def _text(self, v: str):
        """\\text{..}: a number (with a multiplier word) or a text answer."""
        txt = v.strip()
        m = re.fullmatch(r"([-+]?(?:\d+(?:\.\d+)?|\.\d+))(?:\s+([A-Za-z]+))?", txt)
        if m and (m.group(2) is None or m.group(2).lower() in MULTIPLIERS):
            scale = MULTIPLIERS[m.group(2).lower()] if m.group(2) else 1
            return Q(sp.Rational(m.group(1)) * scale, approx="." in txt)  # \\text{12}, \\text{2 million}
        if not txt:
            raise ParseError("empty text")
        return Text(txt)

    def _bracket(self, v: str):
        """An opening bracket: a group, a tuple or interval, a set or set-builder, |x|."""
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
            q = as_quantity(inner)
            return Q(sp.Abs(plain_value(q)), q.approx)
        raise ParseError(f"unexpected {v!r}")

    def _cmd(self, v: str):
        """A command that starts an atom: fractions, roots, functions, constants, Greek letters, sets."""
        if v in ("frac", "dfrac", "tfrac", "cfrac"):
            a = self.read_arg()
            b = self.read_arg()
            return binop("/", a, b)
        if v in ("binom", "dbinom", "tbinom"):
            a = as_quantity(self.read_arg())
            b = as_quantity(self.read_arg())
            if isinstance(a.e, sp.Integer) and int(a.e) > MAX_FACTORIAL:
                raise TooLarge("binomial too large")
            return Q(sp.binomial(a.e, b.e))
        if v == "sqrt":
            return self._sqrt()
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
            return self._floor(v)
        if v in ("ldots", "cdots", "dots"):
            return Q(sp.Symbol("..."))
        if v in ("varnothing", "emptyset"):
            return SSet(sp.S.EmptySet)
        if v == "complement":  # \\complement_{U} A
            return self._complement()
        if v in ("mathbb", "mathcal", "vec", "overline", "overrightarrow", "hat", "bar"):
            return self.read_arg()
        if v in _NON_ATOM_CMDS:
            raise ParseError(f"unexpected \\{v}")
        return Q(sp.Symbol(v))

    def _sqrt(self):
        """\\sqrt{x}, \\sqrt[n]{x}, and \\sqrt of a +- value."""
        idx = None
        if self.at_op("["):
            self.next()
            idx = self.parse_add()
            self.expect_op("]")
        arg = self.read_arg()
        if idx is None:
            if isinstance(arg, PM):
                return PM([Q(sp.sqrt(plain_value(as_quantity(a))), as_quantity(a).approx) for a in arg.alts])
            q = as_quantity(arg)
            return Q(sp.sqrt(plain_value(q)), q.approx)
        return binop("^", arg, binop("/", Q(sp.Integer(1)), idx))

    def _floor(self, v: str) -> Q:
        inner = self.parse_add()
        if not self.at_cmd("rfloor", "rceil"):
            raise ParseError("unclosed floor")
        self.next()
        q = as_quantity(inner)
        return Q((sp.floor if v == "lfloor" else sp.ceiling)(plain_value(q)), q.approx)

    def _complement(self) -> SSet:
        universe = sp.S.Reals
        if self.at_op("_"):
            self.next()
            universe = as_set(self.read_arg())
        sb = as_set(self.parse_pow())
        if universe is None or sb is None:
            raise ParseError("complement of a non-set")
        return SSet(sp.Complement(universe, sb))

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
            approx = any(as_quantity(c).approx for r in rows for c in r)
            return Q(sp.Matrix([[plain_value(as_quantity(c)) for c in r] for r in rows]), approx)
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
