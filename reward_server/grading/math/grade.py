"""The whole check: extract -> normalise -> parse -> compare, and the one place that builds a verdict.

Runs inside the worker process only.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import NamedTuple

import sympy as sp

from .compare import eq, items_of
from .extract import Extracted, extract, last_number
from .lexer import GLUED_UNITS
from .normalize import alternatives, normalize, text_key
from .options import MathGrade, MathOptions, Status
from .parse import parse
from .values import Logic, Q, Ratio, Rel, Seq, SetV, Text, TooLarge

_CODE_RE = re.compile(
    r"__[A-Za-z]\w{0,40}?__|\b(?:lambda|import|exec|eval|compile|open|getattr|globals|locals|system|subprocess|range)\s*[(:]"
    r"|\bimport\s+\w|\bfor\s+\w+\s+in\b"
)

_GLUED_UNIT_RE = re.compile(r"\d(?:" + "|".join(sorted(GLUED_UNITS)) + r")(?![A-Za-z])")

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


def _multi(v) -> bool:
    items = items_of(v)
    if items is not None:
        return len(items) > 1
    if isinstance(v, Seq) and v.open in ("(", "[") and any(isinstance(i, Seq) for i in v.items):
        return True
    return False


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


def _alts_agree(alts: list[str], rv, o: MathOptions) -> bool:
    """Every value a completion offers beside its answer ("\\boxed{5} or maybe 7") equals the reference
    too: a restatement (1/2 or 0.5) passes, a hedge between different values does not."""
    for a in alts:
        avals, _ = _parse_all(a, completion=True)
        if not any(_safe_eq(rv, av, o) for _, av, _ in avals):
            return False
    return True


def _safe_eq(g, p, o: MathOptions) -> bool:
    try:
        return eq(g, p, o)[0]
    except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError, NotImplementedError,
            IndexError, KeyError):
        return False


class _Verdict(NamedTuple):
    reward: float
    status: Status
    reason: str
    extracted: str | None = None
    pred: object = None  # the parsed values shown in the verdict
    ref: object = None


def grade(completion: str, answer: str, options: MathOptions) -> MathGrade:
    """Grade one completion against its reference. Every verdict is built here; only the worker's
    timeout and a dead worker are built elsewhere (`MathGrade.failed`), as no check ran to its end."""
    t0 = time.perf_counter()
    try:
        v = _judge(completion, answer, options)
    except MemoryError:
        v = _Verdict(0.0, "too_large", "memory cap")
    except RecursionError:
        v = _Verdict(0.0, "too_large", "recursion limit")
    except Exception as e:  # noqa: BLE001  (the worker's soft timeout is a BaseException and passes)
        v = _Verdict(0.0, "parse_error", f"{type(e).__name__}"[:100])
    return MathGrade(
        reward=float(v.reward), status=v.status, reason=v.reason, extracted=v.extracted,
        parsed_pred=None if v.pred is None else _shown(v.pred),
        parsed_ref=None if v.ref is None else _shown(v.ref),
        time_s=time.perf_counter() - t0,
    )


def check(completion: str, answer: str, opts: dict | MathOptions) -> dict:
    """`grade` on options given as a dict (validated here), its verdict as a dict: for in-process use."""
    options = opts if isinstance(opts, MathOptions) else MathOptions.model_validate(opts)
    return grade(completion, answer, options).model_dump()


def _judge(completion: str, answer: str, o: MathOptions) -> _Verdict:
    """Sizes first (normalisation and parsing only ever see answers of at most max_answer_chars), then the
    reference, then the completion's answer, then identical text, then the parsed values."""
    if not isinstance(completion, str) or not isinstance(answer, str):
        return _Verdict(0.0, "parse_error", "inputs must be strings")
    if len(completion) > o.max_completion_chars:
        completion = completion[-o.max_completion_chars :]
    if len(answer) > o.max_completion_chars:
        return _Verdict(0.0, "too_large", "reference too long")
    ref = extract(answer, is_reference=True)
    ref_text = ref.joined or ref.answer
    if ref_text and len(ref_text) > o.max_answer_chars:
        return _Verdict(0.0, "too_large", "reference answer too long")
    if not ref.answer or not normalize(ref.answer):
        return _Verdict(0.0, "no_answer", "empty reference")
    pred = extract(completion, o.fallback, o.strip_think)
    refused = _refusal(completion, pred, o)
    if refused is not None:
        return refused
    if pred.alternatives and pred.run:
        # boxes joined by "or" are one answer, alternatives (\\boxed{3} or \\boxed{-1}), never the last box alone
        pred = dataclasses.replace(pred, answer=" or ".join(pred.run))
    # identical text (after light normalisation) needs no parsing
    rk = text_key(normalize(ref_text))
    if not pred.alts and rk and (rk == text_key(normalize(pred.answer))
                                 or (pred.joined and rk == text_key(normalize(pred.joined)))):
        return _Verdict(1.0, "ok", "identical text", pred.answer)
    rvals, rerr = _parse_all(ref_text)
    if not rvals:
        status, msg = rerr or ("parse_error", "reference did not parse")
        return _Verdict(0.0, status, f"reference: {msg}", pred.answer)
    if ref.joined or _SOLUTION_LEAD.search(ref.lead):
        # several boxes, or "the solutions are x = \\boxed{1, -2}": a set of answers
        rvals = [(t, _unordered_ref(v), g) for t, v, g in rvals]
    return _match(pred, rvals, o)


def _refusal(completion: str, pred: Extracted, o: MathOptions) -> _Verdict | None:
    """No answer, an answer too long, or one that looks like code: the verdict, else None."""
    if pred.answer and (len(pred.answer) > o.max_answer_chars or len(pred.joined or "") > o.max_answer_chars):
        return _Verdict(0.0, "too_large", "answer too long", pred.answer[:200])
    if not pred.answer or not normalize(pred.answer):
        if pred.how.startswith("hedged") and _CODE_RE.search(completion):
            return _Verdict(0.0, "parse_error", "code-like answer refused")
        return _Verdict(0.0, "no_answer", pred.how or "no answer found")
    if _CODE_RE.search(pred.answer) or (pred.how in _FALLBACKS and _CODE_RE.search(completion)):
        return _Verdict(0.0, "parse_error", "code-like answer refused", pred.answer)
    return None


def _pred_texts(pred: Extracted, rvals: list, o: MathOptions) -> list[str]:
    """The completion's answer texts to try, in order: all its boxes joined (when the reference lists
    several values), its answer, and its last number as a fallback."""
    texts = []
    if pred.joined and any(_multi(v) for _, v, _ in rvals):
        texts.append(pred.joined)
    texts.append(pred.answer)
    if (pred.how in ("bare", "phrase", "last math block", "solutions phrase") and o.fallback == "last_number"
            and not pred.hedged):  # "7, not 5", "5 or 7", "x > 5" are not their last number
        ln = last_number(pred.answer)
        if ln and ln != pred.answer:
            texts.append(ln)
    return texts


def _match(pred: Extracted, rvals: list, o: MathOptions) -> _Verdict:
    """Try each answer text of the completion against every reading of the reference."""
    pred_texts = _pred_texts(pred, rvals, o)
    first_err = None
    last_pv = None
    why = ""
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
        found, why = _match_values(pred, ptxt, pvals, rvals, o)
        if found is not None:
            return found
    if last_pv is None:
        status, msg = first_err or ("parse_error", "answer did not parse")
        return _Verdict(0.0, status, msg, pred.answer, None, rvals[0][1])
    return _Verdict(0.0, "ok", why, pred.answer, last_pv[0][1], rvals[0][1])


def _match_values(pred: Extracted, ptxt: str, pvals: list, rvals: list, o: MathOptions) -> tuple[_Verdict | None, str]:
    """Every reading of one answer text against every reading of the reference: the first verdict that
    settles it, else None and the last reason they differ."""
    why = ""
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
                return _Verdict(0.0, "too_large", str(e), ptxt, pv, rv), why
            except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError,
                    NotImplementedError, IndexError, KeyError) as e:
                ok, why = False, f"compare failed: {type(e).__name__}"
            if ok and not _alts_agree(pred.alts, rv, o):
                return _Verdict(0.0, "ok", "hedged between different values", ptxt, pv, rv), why
            if ok:
                return _Verdict(1.0, "ok", why, ptxt, pv, rv), why
    return None, why
