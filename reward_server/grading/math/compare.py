"""Equivalence of two parsed values: one comparison per pair of kinds (text, relations, sets, ratios,
alternatives, collections, tuples, quantities), chosen by `eq`'s dispatch table in order.

Runs inside the worker process only (it may call SymPy on parsed objects, never on text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import sympy as sp
from sympy.core.function import AppliedUndef

from .numeric import domain_branches, evaluate, near, probe_points, q_eq, real_defined, scalar_eq
from .options import MathOptions
from .sets import as_set, inequality_form_ok, interval_union, rel_to_set, rel_var, sets_equal
from .values import PM, Logic, Q, Ratio, Rel, Seq, SetV, SSet, Text, name_like, plain_value


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


def _eqn_eq(g: Rel, p: Rel, o: MathOptions) -> tuple[bool, str]:
    if len(g.parts) != 2 or len(p.parts) != 2:
        if len(g.parts) >= 2 and len(p.parts) >= 2:
            return _eqn_eq(Rel([g.parts[0], g.parts[-1]], ["="]), Rel([p.parts[0], p.parts[-1]], ["="]), o)
        return False, "equations differ"
    try:
        d1 = plain_value(g.parts[0]) - plain_value(g.parts[1])
        d2 = plain_value(p.parts[0]) - plain_value(p.parts[1])
    except Exception:  # noqa: BLE001
        return False, "equations differ"
    if isinstance(d1, sp.MatrixBase) or isinstance(d2, sp.MatrixBase):
        return False, "matrix equations"
    if d1.free_symbols != d2.free_symbols or not d1.free_symbols:
        return False, "equations differ"
    syms = sorted(d1.free_symbols, key=lambda s: s.name)
    b1, b2 = domain_branches(d1), domain_branches(d2)
    ratio = None
    valid = 0
    for pt in probe_points(syms, 7):
        if not real_defined(b1, pt):
            continue  # outside the reference equation's real domain
        a = evaluate(d1, pt)
        b = evaluate(d2, pt) if real_defined(b2, pt) else None
        if a is not None and b is None:
            return False, "equations differ"
        if a is None or b is None or abs(b) < 1e-12 or abs(a) < 1e-12:
            continue
        r = a / b
        if ratio is None:
            ratio = r
        elif not near(r, ratio, 1e-8):
            return False, "equations differ"
        valid += 1
        if valid >= 5:
            break
    return (True, "equivalent equations") if valid >= 3 else (False, "equations not shown equal")


def items_of(v) -> list | None:
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


def _ordered_list(g, o: MathOptions) -> bool:
    """Is the reference a list whose order counts (see `list_order`)?"""
    if o.list_order == "unordered" or not isinstance(g, Seq) or g.open != "":
        return False
    if o.list_order == "ordered":
        return True
    return g.commas and all(isinstance(x, Q) and not isinstance(x.e, sp.MatrixBase) for x in g.items)


def _unordered_eq(gi: list, pi: list, o: MathOptions) -> bool:
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
                out.extend(v.alts if isinstance(v, PM) else items_of(v) if items_of(v) is not None and isinstance(v, PM) else [v])
                continue
        out.append(it)
    return out


Verdict = tuple[bool, str]


def _text_key(v) -> str | None:
    if isinstance(v, Text):
        return re.sub(r"[^0-9a-z]", "", v.s.lower())
    if isinstance(v, Q) and isinstance(v.e, sp.Symbol):
        return re.sub(r"[^0-9a-z]", "", v.e.name.lower())
    if isinstance(v, Q) and v.e == sp.E:
        return "e"
    return None


def _text_eq(g, p, o: MathOptions) -> Verdict:
    """Text answers: the same letters and digits (a symbol or e counts as its name)."""
    kg, kp = _text_key(g), _text_key(p)
    return (True, "text equal") if kg and kg == kp else (False, "text differs")


def _rels_eq(g, p, o: MathOptions) -> Verdict:
    """Two relations (or inequalities joined by or/and): named values, equations, or solution sets."""
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
        return (True, "same solution set") if sets_equal(sg, sp_) else (False, "inequalities differ")
    return False, "relations differ"


def _rel_other_eq(g, p, o: MathOptions) -> Verdict:
    """One side a relation: its value ('x = 5'), or its solution set against an interval/set."""
    g_rel = isinstance(g, (Rel, Logic))
    r, other, rel_is_gold = (g, p, True) if g_rel else (p, g, False)
    v = _rel_value(r) if isinstance(r, Rel) else None
    if v is not None:
        return eq(v, other, o) if rel_is_gold else eq(other, v, o)
    so = as_set(other)
    so = interval_union(other) if so is None else so
    s = rel_to_set(r) if so is not None else None
    if s is not None:
        if isinstance(other, SSet) and other.var is not None and other.var != rel_var(r):
            return False, "different variables"  # x \\in S vs t > 2
        if not rel_is_gold and not inequality_form_ok(so, o.interval_form, getattr(other, "builder", False)):
            return False, "inequality answer for an interval/set reference"
        return (True, "same solution set") if sets_equal(s, so) else (False, "sets differ")
    return False, "relation vs value"


def _sets_eq(g, p, o: MathOptions) -> Verdict:
    """Sets built with unions / intervals."""
    a, b = as_set(g), as_set(p)
    a = interval_union(g) if a is None else a
    b = interval_union(p) if b is None else b
    if a is None or b is None:
        return False, "set vs non-set"
    if getattr(g, "var", None) is not None and getattr(p, "var", None) is not None and g.var != p.var:
        return False, "different variables"
    return (True, "sets equal") if sets_equal(a, b) else (False, "sets differ")


def _ratios_eq(g, p, o: MathOptions) -> Verdict:
    """Ratios: term by term, as a quotient (two terms), or proportional; a two-term ratio vs a value."""
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


def _alternatives_eq(g, p, o: MathOptions) -> Verdict:
    """'5 or 7' for one value: every alternative must be it (a restatement, '1/2 or 0.5'), never one of them."""
    alts = _expand_rel_list(p.items)
    if alts and all(eq(g, x, o)[0] for x in alts):
        return True, "every alternative equal"
    return False, "alternatives for one value"


def _collections_eq(g, p, o: MathOptions) -> Verdict:
    """Two collections: in order when the reference's order counts, else as sets of elements."""
    gi, pi = _expand_rel_list(items_of(g)), _expand_rel_list(items_of(p))
    if _ordered_list(g, o) and not isinstance(p, PM):  # "\\pm 3" names a pair, in no order
        if len(gi) != len(pi):
            return False, "lengths differ"
        if all(eq(x, y, o)[0] for x, y in zip(gi, pi, strict=True)):
            return True, "lists equal in order"
        return False, "elements or order differ"
    return (True, "same elements") if _unordered_eq(gi, pi, o) else (False, "elements differ")


def _bracketed(v) -> bool:
    return isinstance(v, Seq) and v.open in "([" and v.open != ""


def _tuples_eq(g, p, o: MathOptions) -> Verdict:
    """Tuples / vectors ('( )', '[ ]'): the same brackets and elements in order; a one-column matrix
    equals a tuple of its entries."""
    gs, ps = _bracketed(g), _bracketed(p)
    if gs and ps and (g.open != p.open or g.close != p.close):
        return False, "brackets differ"
    if isinstance(g, Seq) and isinstance(p, Seq):
        a, b = _expand_rel_list(g.items), _expand_rel_list(p.items)
        if len(a) != len(b):
            return False, "lengths differ"
        for x, y in zip(a, b, strict=True):
            ok, _ = eq(x, y, o)
            if not ok:
                return False, "elements differ"
        return True, "tuples equal"
    if items_of(g) is not None or items_of(p) is not None:
        return False, "tuple vs list"
    seq, m = (g, p) if gs else (p, g)
    if isinstance(m, Q) and isinstance(m.e, sp.MatrixBase) and 1 in m.e.shape and len(m.e) == len(seq.items):
        for x, y in zip(seq.items, list(m.e), strict=True):
            if not isinstance(x, Q) or not scalar_eq(plain_value(x), y, x.approx or m.approx, o)[0]:
                return False, "elements differ"
        return True, "vector equal"
    return False, "tuple vs value"


def _one_item(items: list | None) -> bool:
    return items is not None and len(items) == 1


def _differ(reason: str):
    return lambda g, p, o: (False, reason)


# eq's dispatch: the first rule whose test holds on (reference, answer) compares them. Order matters:
# text before everything, relations before sets, a collection of one item stands for the item.
_RULES: tuple[tuple[Callable[[Any, Any], bool], Callable[[Any, Any, MathOptions], Verdict]], ...] = (
    (lambda g, p: isinstance(g, Text) or isinstance(p, Text), _text_eq),
    (lambda g, p: isinstance(g, (Rel, Logic)) and isinstance(p, (Rel, Logic)), _rels_eq),
    (lambda g, p: isinstance(g, (Rel, Logic)) or isinstance(p, (Rel, Logic)), _rel_other_eq),
    (lambda g, p: isinstance(g, SSet) or isinstance(p, SSet), _sets_eq),
    (lambda g, p: isinstance(g, Ratio) or isinstance(p, Ratio), _ratios_eq),
    (lambda g, p: isinstance(p, Seq) and p.alternatives and p.open == "" and isinstance(g, Q), _alternatives_eq),
    (lambda g, p: _one_item(items_of(g)), lambda g, p, o: eq(items_of(g)[0], p, o)),
    (lambda g, p: _one_item(items_of(p)), lambda g, p, o: eq(g, items_of(p)[0], o)),
    (lambda g, p: items_of(g) is not None and items_of(p) is not None, _collections_eq),
    (lambda g, p: _bracketed(g) or _bracketed(p), _tuples_eq),
    (lambda g, p: items_of(g) is not None or items_of(p) is not None, _differ("list vs value")),
    (lambda g, p: isinstance(g, SetV) or isinstance(p, SetV), _differ("set vs value")),
    (lambda g, p: isinstance(g, Q) and isinstance(p, Q), q_eq),
)


def eq(g, p, o: MathOptions) -> Verdict:
    """Is the answer p equivalent to the reference g? (verdict, reason)."""
    for applies, compare in _RULES:
        if applies(g, p):
            return compare(g, p, o)
    return False, "kinds differ"


def _proportional(g: Ratio, p: Ratio, o: MathOptions) -> bool:
    """a:b:c = ka:kb:kc for one k > 0 (2:4:6 = 1:2:3), by cross products against a non-zero pivot."""
    if not all(isinstance(x, Q) and isinstance(x.e, sp.Basic) and not x.e.free_symbols for x in g.items + p.items):
        return False
    gv, pv = [plain_value(x) for x in g.items], [plain_value(x) for x in p.items]
    approx = any(x.approx for x in g.items + p.items)
    k = next((i for i, x in enumerate(gv) if x != 0), None)
    if k is None or pv[k] == 0:
        return False
    scale = evaluate(gv[k] / pv[k])
    if scale is None or abs(scale.imag) > 1e-12 or scale.real <= 0:
        return False
    return all(scalar_eq(gv[i] * pv[k], pv[i] * gv[k], approx, o)[0] for i in range(len(gv)))


def _div(r: Ratio):
    a, b = r.items
    if not isinstance(a, Q) or not isinstance(b, Q) or b.e == 0:
        raise ValueError("ratio")
    return Q(plain_value(a) / plain_value(b), a.approx or b.approx)

