"""Values seen as real sets: intervals, \\{..\\}, unions, solution sets of inequalities, and how two sets
are compared."""

from __future__ import annotations

import sympy as sp
from sympy.core.function import AppliedUndef

from .values import PM, Logic, Q, Rel, Seq, SetV, SSet, as_quantity, name_like, plain_value


def as_set(v):
    """A value seen as a SymPy set (intervals, \\{..\\}, unions), or None."""
    if isinstance(v, SSet):
        return v.s
    if isinstance(v, SetV):
        vals = []
        for it in v.items:
            if isinstance(it, PM):
                vals.extend(plain_value(as_quantity(a)) for a in it.alts)
            elif isinstance(it, Q) and not isinstance(it.e, sp.MatrixBase):
                vals.append(plain_value(it))
            else:
                return None
        return sp.FiniteSet(*vals)
    if isinstance(v, Seq) and len(v.items) == 2 and v.open in "([" and v.close in ")]" and v.open:
        a, b = v.items
        if not (isinstance(a, Q) and isinstance(b, Q)):
            return None
        lo, hi = plain_value(a), plain_value(b)
        if not (getattr(lo, "is_real", False) or lo in (sp.oo, -sp.oo)) or not (
            getattr(hi, "is_real", False) or hi in (sp.oo, -sp.oo)
        ):
            return None
        try:
            return sp.Interval(lo, hi, v.open == "(", v.close == ")")
        except Exception:  # noqa: BLE001
            return None
    if isinstance(v, PM):
        return sp.FiniteSet(*[plain_value(as_quantity(a)) for a in v.alts])
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
    if any(_hard_to_solve(plain_value(p), var_expr) for p in parts):
        return None
    t = sp.Dummy("t", real=True)
    out = sp.S.Reals
    rels = {"<": sp.Lt, ">": sp.Gt, "<=": sp.Le, ">=": sp.Ge, "!=": sp.Ne, "=": sp.Eq}
    for (a, b), op in zip(zip(parts, parts[1:], strict=False), r.ops, strict=True):
        la, lb = plain_value(a).subs(var_expr, t), plain_value(b).subs(var_expr, t)
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
        e = plain_value(a) if isinstance(a, Q) else None
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


def sign_restricted(s, sign: str):
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


def sets_equal(a, b) -> bool:
    if a == b:
        return True
    try:
        return sp.Complement(a, b) == sp.S.EmptySet and sp.Complement(b, a) == sp.S.EmptySet
    except Exception:  # noqa: BLE001
        return False


def interval_union(v):
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


def inequality_form_ok(ref_set, policy: str, builder: bool = False) -> bool:
    """May an inequality answer stand for this interval/set reference? 'either': yes. 'required': no
    (Math-Verify's policy). 'union' (default): only when the reference is not one interval, i.e. the
    question's set takes a union of pieces (|x| > 2, x < 1 or x > 3, x != 3), which inequalities
    write as naturally as interval notation, or when the reference itself states conditions
    (set-builder); a single interval reference asked for interval notation."""
    if policy == "either":
        return True
    return policy == "union" and (builder or _pieces(ref_set) >= 2)

