"""Light text normalisation before parsing: escapes, digit groups, repeating decimals, ISO intervals, and
the several readings of one answer text (1,000 vs 1,5; number words; "all real numbers")."""

from __future__ import annotations

import re

from .lexer import GLUED_UNITS
from .numwords import replace_number_words

_CMD_NAMES = (
    "frac|dfrac|tfrac|cfrac|sqrt|boxed|left|right|begin|end|text|pi|cdot|times|infty|le|ge|leq|geq|neq|"
    "mathrm|mathbf|textbf|sin|cos|tan|log|ln|pm|cup|cap|in|approx|circ|quad|qquad|mbox|dots|ldots|cdots"
)
_DOUBLE_ESC = re.compile(r"(?<!\\)\\\\(?=(?:" + _CMD_NAMES + r")\b)")

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

