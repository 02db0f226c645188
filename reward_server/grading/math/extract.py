"""Finding the final answer in a completion (pure string work, no evaluation)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .numwords import find_number_words

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_MARKER_RE = re.compile(
    r"(?:final\s+answer\s*(?:is|:)?|the\s+answer\s+is|answer\s+is|answer\s*:|\banswer\b(?=\s*[\\$]))"
    r"|答案\s*[:：是为]?|réponse\s*(?:est|:)|respuesta\s*(?:es|:)|antwort\s*(?:ist|:)",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(
    r"\\frac\{-?\d+\}\{\d+\}"
    r"|(?<![A-Za-z\d])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)"
    # thousands groups written with (thin) spaces, \, or {,}: 123 456, 4\,096, 14{,}916
    r"|(?<![A-Za-z\d.,])-?\d{1,3}(?:(?:\\[,;: ]|\{,\}|[ \u2009\u202f\u00a0])\d{3})+(?:\.\d+)?(?![\d,.]\d)(?!\d)"
    r"|(?<![A-Za-z\d])-?\d+(?:[.,]\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?\s*(?:%|\\%)?"
    r"|(?<![A-Za-z\d])-?\.\d+"
)
_MATH_OPEN = re.compile(r"\$|\\[\[(]")
_CONNECTOR_END = re.compile(r"(?:\band|\bor|,|;|\\quad|\\qquad|&|\\text\{\s*(?:and|or)\s*\}|\\\\)\s*$", re.I)


_OR_RE = re.compile(r"\bor\b", re.IGNORECASE)
_LEAD_WORD = re.compile(r"^(?:so|thus|hence|therefore|then)\b,?\s+(?=\S)", re.IGNORECASE)

# Hedges a careful judge refuses to read as a plain answer. Negations: the value named is ruled out
# ("7, not 5", "isn't 5", "rather than 5"). Alternatives: several values, or a guess ("5 or 7", "maybe 5",
# "if n is odd"). Bounds and relations: the answer is a range, not the number ("at least 5", "x > 5").
_NEG = (r"\b(?:not|never|no\s+longer|nor|neither|rather\s+than|instead\s+of|other\s+than|except|excluding|wrong"
        r"|incorrect)\b|n't\b|≠|∉|\\(?:neq?|notin|not)(?![A-Za-z])")
_GUESS = r"\b(?:either|maybe|perhaps|possibly|probably|might|could|whether|if|unless|otherwise|alternatively|versus|vs)\b"
_ALT = r"\bor\b|" + _GUESS
_BOUND = (r"\b(?:at\s+(?:least|most)|(?:less|more|greater|fewer|larger|smaller|bigger|higher|lower)\s+than|between"
          r"|up\s+to|below|above|under|over|exceeds?)\b|[<>≤≥]|\\(?:leq?|geq?|lt|gt|leqslant|geqslant)(?![A-Za-z])")
_HEDGE_RE = re.compile("|".join((_NEG, _ALT, _BOUND)), re.IGNORECASE)
_BOX_CUE_RE = re.compile("|".join((_NEG, r"\bor\b", _BOUND)), re.IGNORECASE)  # before a box: "not \\boxed{5}"
# between boxes of one run: every cue but a plain "or" ("\\boxed{5} if n is even and \\boxed{7} ...")
_RUN_CUE_RE = re.compile("|".join((_NEG, _BOUND, _GUESS)), re.IGNORECASE)
# an alternative offered right after the answer: "\\boxed{5} or 7", "The answer is 5. Or maybe 7."
_ALT_AFTER_RE = re.compile(
    r"[\s$,;:.!?()\\\]]{0,12}(?:or|either|maybe|perhaps|possibly|probably|otherwise|unless|no|actually)\b", re.IGNORECASE)
# a bound right after the answer: "\\boxed{5} or more", "12 at most", "5 and above"
_BOUND_AFTER_RE = re.compile(
    r"[\s$,;:)\\\]]{0,8}(?:(?:or|and)\s+(?:more|less|fewer|greater|larger|smaller|higher|lower|above|below|up|over|under)"
    r"|at\s+(?:the\s+)?(?:most|least|minimum|maximum)|or\s+so)\b", re.IGNORECASE)
# "X, not Y" / "X rather than Y" / "X instead of Y": the answer is X
_NEG_JOIN_RE = re.compile(r"[ \t]{0,8}[,;(]?[ \t]{0,8}(?:but[ \t]+)?(?:not|rather[ \t]+than|instead[ \t]+of)\b[ \t]*",
                          re.IGNORECASE)
# where the clause that holds a value starts: punctuation, "=", a digit or a closing bracket, a conjunction
_CLAUSE_START = re.compile(r"[.!?;:,\n=\d})\]]|\b(?:so|thus|therefore|hence|then|and|but|is|are|equals?)\b", re.IGNORECASE)
_RANGE_RE = re.compile(r"\b(?:between|from)\b[^.!?;:\n=]{0,60}\b(?:and|to)\s*$", re.IGNORECASE)
_OPENERS = re.compile(r"(?:\s|\$|\\\(|\\\[|\\(?:boxed|fbox)\s*\{|\*\*)+$")


def hedged(text: str) -> bool:
    """Does an answer text negate, hedge or bound its value ("7, not 5", "5 or 7", "x > 5")?"""
    return _HEDGE_RE.search(text) is not None


def _clause_before(text: str, pos: int, max_words: int = 4) -> str:
    """The last few words of the clause that ends at pos (math openers before pos dropped); after a
    range's "between 5 and" / "from 5 to", the word "between"."""
    head = text[max(0, pos - 200) : pos]
    m = _OPENERS.search(head)
    if m is not None:
        head = head[: m.start()]
    if _RANGE_RE.search(head[-80:]) is not None:
        return "between"  # the end of a range is no answer of its own
    cut = 0
    for m in _CLAUSE_START.finditer(head):
        cut = m.end()
    clause = head[cut:]
    return " ".join(clause.split()[-max_words:])


def _alternatives_after(text: str, pos: int) -> list[str]:
    """A value offered as an alternative right after an answer that ends at pos: "or 7", ". Or maybe $7$",
    "? No, 7" (the first number or math block in that sentence); a bound ("or more", "at most") is an
    alternative no reference equals; [] when none."""
    if _BOUND_AFTER_RE.match(text, pos) is not None:
        return ["\\text{a bound, not a value}"]  # never equal to a reference
    m = _ALT_AFTER_RE.match(text, pos)
    if m is None:
        return []
    rest = _sentence(text[m.end() : m.end() + 300])
    blocks = _math_blocks(rest)
    nums = list(_NUMBER_RE.finditer(rest))
    starts = [(b[0], b[2]) for b in blocks[:1]] + [(n.start(), n.group(0).strip()) for n in nums[:1]]
    if starts:
        return [min(starts)[1]]
    if m.group(0).rstrip().lower().endswith(("otherwise", "unless")):
        return ["\\text{a condition, not a value}"]  # "\\boxed{7} otherwise": the answer holds only sometimes
    return []  # "\\boxed{5}. No other value works.": no competing value


def _negated_tail(seg: str) -> str | None:
    """'7, not 5' / '7 rather than 5' / '7 (not 5)': the value kept ('7'), when that is all it says;
    None when the text is anything else ("7, not sure", "not 5", "5 or 7, not 9")."""
    ms = list(_NEG_JOIN_RE.finditer(seg))
    if len(ms) != 1:
        return None
    head, tail = seg[: ms[0].start()].strip(), seg[ms[0].end() :].strip()
    tail = tail[:-1].strip() if tail.endswith(")") and ms[0].group(0).strip().startswith("(") else tail
    if not head or not tail or len(tail) > 80 or hedged(head) or hedged(tail):
        return None
    if re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", " ", tail)):
        return None  # words after "not": a qualifier ("not including 3"), not a ruled-out value
    return head


@dataclass
class Extracted:
    answer: str | None  # the final answer text (last box, phrase, bare answer, or fallback)
    joined: str | None = None  # several boxes in a row joined with ", " (a multi-answer list)
    how: str = ""
    boxes: list[str] = field(default_factory=list)
    lead: str = ""  # up to 60 characters of text just before the (first) box used
    alternatives: bool = False  # the joined boxes were connected by "or" (x = \\boxed{3} or x = \\boxed{-1})
    run: list[str] = field(default_factory=list)  # the joined boxes themselves
    hedged: bool = False  # the answer text negates, hedges or bounds ("7, not 5", "5 or 7", "x > 5"): no last-number reading
    alts: list[str] = field(default_factory=list)  # values offered after it ("\\boxed{5} or maybe 7"): must equal it too


_BRACE_RE = re.compile(r"\\(?:boxed|fbox)\s*\{|\\[{}]|[{}]")


def find_boxes(text: str) -> list[tuple[int, int, str]]:
    """All outermost \\boxed{...}/\\fbox{...} with balanced braces: (start, end, content).
    One pass over the braces (a stack of open boxes), so unclosed boxes cost nothing extra."""
    out = []
    depth = 0
    open_boxes: list[tuple[int, int, int]] = []  # (start, content start, depth outside it)
    for m in _BRACE_RE.finditer(text):
        tok = m.group(0)
        if tok.startswith("\\") and len(tok) == 2:
            continue  # \{ \} are not grouping braces
        if tok != "}":
            if tok != "{":
                open_boxes.append((m.start(), m.end(), depth))
            depth += 1
            continue
        depth -= 1
        if open_boxes and open_boxes[-1][2] == depth:
            start, cstart, _ = open_boxes.pop()
            out.append((start, m.end(), text[cstart : m.start()]))
        if depth < 0:
            depth = 0
            open_boxes.clear()
    out.sort()
    res = []  # drop boxes nested inside other boxes
    for b in out:
        if res and b[0] < res[-1][1]:
            continue
        res.append(b)
    return res


def _unclosed_box_tail(text: str, boxes: list[tuple[int, int, str]]) -> str | None:
    """A reference whose last \\boxed{ never closes (a truncated or hand-edited data field): what
    follows it to the end. Only for references: an unclosed box in a completion is a cut-off answer."""
    last = None
    for m in _BOX_RE.finditer(text):
        last = m
    if last is None or any(b[0] <= last.start() < b[1] for b in boxes):
        return None
    tail = text[last.end() :].strip()
    return tail or None


def _box_run(text: str, boxes: list[tuple[int, int, str]]) -> list[str]:
    """The last box and the boxes before it joined only by short connector text."""
    run = [boxes[-1]]
    for b in reversed(boxes[:-1]):
        between = text[b[1] : run[0][0]]
        if len(between) > 60:
            break
        between_clean = re.sub(r"\\(?:text|mbox|textnormal)\s*\{([^{}]*)\}", r" \1 ", between)
        between_clean = re.sub(r"[\s$]|\\[\[\]()]", " ", between_clean).strip()
        between_clean = re.sub(r"[A-Za-z]\w*(?:_\{?\w+\}?)?\s*=\s*$", "", between_clean).strip()
        words = re.findall(r"[A-Za-z]+", re.sub(r"\\[A-Za-z]+", " ", between_clean))
        ok = (
            len(between) <= 60
            and (not between_clean or not words or _CONNECTOR_END.search(between_clean) is not None)
            and len(words) <= 6
        )
        if not ok:
            break
        run.insert(0, b)
    return [b[2] for b in run]


def strip_think(text: str) -> str | None:
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        return None
    return text


def _clean_segment(seg: str) -> str:
    seg = seg.strip()
    seg = re.sub(r"^\s*[:：]\s*", "", seg)
    seg = seg.replace("**", "")
    return seg.strip()


def _sentence(seg: str) -> str:
    """Cut a 'final answer' segment at the end of its sentence (math delimiters kept intact)."""
    out = []
    i = 0
    n = len(seg)
    spans = {a: b for a, b, _ in _math_blocks(seg)}
    content = False
    while i < n:
        if i in spans:
            out.append(seg[i : spans[i]])
            content = True
            i = spans[i]
            continue
        c = seg[i]
        if c == "\n" and content:
            break
        content = content or not c.isspace()
        if c in ".。!?" and (i + 1 >= n or seg[i + 1] in " \n\t\"'") and not (
            i > 0 and seg[i - 1].isdigit() and i + 1 < n and seg[i + 1].isdigit()
        ):
            break
        if seg.startswith("I hope", i) or seg.startswith("<|", i):
            break
        out.append(c)
        i += 1
    return "".join(out).strip()


_KNOWN_WORDS = {
    "sin", "cos", "tan", "sec", "csc", "cot", "log", "ln", "exp", "sqrt", "pi", "frac", "dfrac", "tfrac",
    "text", "mathrm", "left", "right", "infty", "cdot", "times", "and", "or", "cm", "km", "mm", "kg",
}


def is_prose(text: str) -> bool:
    """Running text (sentences) rather than a bare answer."""
    t = re.sub(r"\\[A-Za-z]+", " ", text)
    t = re.sub(r"\{[^{}]*\}", " ", t) if len(t) < 400 else t
    words = [w for w in re.findall(r"[^\W\d_]{2,}", t) if w.lower() not in _KNOWN_WORDS]
    if any(not w.isascii() for w in words):
        return True
    return len(words) >= 2


def last_number(text: str) -> str | None:
    ms = list(_NUMBER_RE.finditer(text))
    return ms[-1].group(0).strip() if ms else None


class _Finder:
    """str.find with memory: for positions that only grow, each search resumes where the last ended."""

    def __init__(self, text: str):
        self.text = text
        self.memo: dict[str, tuple[int, int]] = {}

    def find(self, sub: str, pos: int) -> int:
        got = self.memo.get(sub)
        if got is not None and got[0] <= pos and (got[1] >= pos or got[1] == -1):
            return got[1]
        idx = self.text.find(sub, pos)
        self.memo[sub] = (pos, idx)
        return idx


def _math_blocks(text: str) -> list[tuple[int, int, str]]:
    """$$..$$, \\[..\\], \\(..\\) (one line), $..$ (one line): (start, end, inner), left to right, in
    linear time (each closer is searched once per position reached, never rescanned)."""
    out = []
    f = _Finder(text)
    pos = 0
    n = len(text)
    while pos < n:
        m = _MATH_OPEN.search(text, pos)
        if m is None:
            break
        i = m.start()
        tok = m.group(0)
        end = -1
        if tok == "$":
            if text.startswith("$$", i):
                j = f.find("$$", i + 3)
                if j >= 0:
                    end, inner = j + 2, text[i + 2 : j]
            if end < 0:
                j = f.find("$", i + 1)
                nl = f.find("\n", i + 1)
                if j > i + 1 and (nl < 0 or j < nl):
                    end, inner = j + 1, text[i + 1 : j]
        else:
            close = "\\]" if tok == "\\[" else "\\)"
            j = f.find(close, i + 3)
            nl = f.find("\n", i + 2) if tok == "\\(" else -1
            if j >= 0 and (nl < 0 or j < nl):
                end, inner = j + 2, text[i + 2 : j]
        if end < 0:
            pos = i + 1
            continue
        out.append((i, end, inner))
        pos = end
    return out


def _sub_math(s: str, repl) -> str:
    """s with every math block replaced by repl(inner)."""
    out = []
    pos = 0
    for a, b, inner in _math_blocks(s):
        out.append(s[pos:a])
        out.append(repl(inner))
        pos = b
    out.append(s[pos:])
    return "".join(out)


def _is_one_block(s: str) -> bool:
    blocks = _math_blocks(s)
    return len(blocks) == 1 and blocks[0][0] == 0 and blocks[0][1] == len(s)


def unwrap_math(s: str) -> str:
    s = s.strip()
    blocks = _math_blocks(s)
    if len(blocks) == 1 and blocks[0][0] == 0 and blocks[0][1] == len(s):
        return blocks[0][2].strip()
    if blocks:
        # keep the text, drop the delimiters ("$12$ and $13$")
        return _sub_math(s, lambda inner: inner).strip()
    return s.strip("$ ").strip()


def extract(text: str, fallback: str = "last_number", strip_think_tags: bool = True, is_reference: bool = False
            ) -> Extracted:
    """Find the final answer in `text`.

    Order: last \\boxed{}/\\fbox{} (with a joined run of boxes for multi-answer references),
    then 'final answer is' / 'the answer is' / 'Answer:' phrases, then a bare answer (the whole
    text when it is short and math-like), then the last math block or last number (fallback).
    """
    if strip_think_tags and not is_reference:
        t = strip_think(text)
        if t is None:
            return Extracted(None, how="unclosed <think>")
        text = t
    text = text.replace("<|begin_of_box|>", "\\boxed{").replace("<|end_of_box|>", "}")
    gsm = gsm8k_answer(text)
    if gsm is not None:
        return Extracted(gsm, how="####")
    boxes = find_boxes(text)
    if is_reference and (tail := _unclosed_box_tail(text, boxes)) is not None:
        return Extracted(tail, how="unclosed box")
    markers = list(_MARKER_RE.finditer(text))
    if boxes and not (markers and markers[-1].start() > boxes[-1][1] and _sentence(
            _clean_segment(text[markers[-1].end():]))):
        return _from_boxes(text, boxes, is_reference)
    if markers and (found := _from_marker(text, markers[-1], is_reference)) is not None:
        return found
    stripped = text.strip()
    if not stripped:
        return Extracted(None, how="empty")
    if not is_reference:
        text = cut_verification(text)
        stripped = text.strip()
    if is_reference or not is_prose(stripped) or _only_number_words(stripped):
        bare = unwrap_math(stripped).rstrip(" .")
        if not is_reference:
            bare = _LEAD_WORD.sub("", bare, count=1)  # "So x > 2", "Thus $x = 3$"
            bare, hedge = _unhedged(bare)
            return Extracted(bare, how="bare", hedged=hedge)
        return Extracted(bare, how="bare")
    if fallback == "none":
        return Extracted(None, how="no final answer")
    sol = _solutions_phrase(text)
    if sol is not None:
        return sol
    return _last_value(text)


def _from_boxes(text: str, boxes: list[tuple[int, int, str]], is_reference: bool) -> Extracted:
    """The last box (and the run of boxes it ends), unless the words between or before them hedge."""
    run = _box_run(text, boxes)
    last = run[-1].strip()
    joined = ", ".join(x.strip() for x in run) if len(run) > 1 else None
    k0 = len(boxes) - len(run)
    first = boxes[k0][0]
    ors = any(_OR_RE.search(text[boxes[k][1] : boxes[k + 1][0]]) for k in range(k0, len(boxes) - 1))
    if is_reference:  # a reference's words are the data set's, not a hedge ("x = 1/5, or \\boxed{20} percent")
        return Extracted(last, joined, "boxed", [b[2] for b in boxes], text[max(0, first - 60) : first], ors,
                         [x.strip() for x in run] if len(run) > 1 else [])
    if any(_RUN_CUE_RE.search(text[boxes[k][1] : boxes[k + 1][0]]) for k in range(k0, len(boxes) - 1)):
        return Extracted(None, how="hedged boxes")  # "\\boxed{5} if n is even and \\boxed{7} otherwise"
    if _BOX_CUE_RE.search(_clause_before(text, first)):
        # "not \\boxed{5}", "x \\ge \\boxed{5}": the box is ruled out or bounded; "\\boxed{7}, not \\boxed{5}" means 7
        between = re.sub(r"\$|\\[()\[\]]", "", text[boxes[k0 - 1][1] : first]) if k0 > 0 and len(run) == 1 else ""
        if not between or not _NEG_JOIN_RE.fullmatch(between):
            return Extracted(None, how="negated or bounded box")
        prev = boxes[k0 - 1]
        return Extracted(prev[2].strip(), None, "boxed", [b[2] for b in boxes], text[max(0, prev[0] - 60) : prev[0]],
                         alts=_alternatives_after(text, boxes[-1][1]))
    return Extracted(last, joined, "boxed", [b[2] for b in boxes], text[max(0, first - 60) : first], ors,
                     [x.strip() for x in run] if len(run) > 1 else [], alts=_alternatives_after(text, boxes[-1][1]))


def _from_marker(text: str, m: re.Match, is_reference: bool) -> Extracted | None:
    """The sentence after the last 'the answer is' / 'Answer:' phrase, or None when it is empty."""
    seg = _sentence(_clean_segment(text[m.end() :]))
    if not seg:
        return None
    # "The volume of $X$ is 120": keep what follows the last ' is '
    sent_at = text.find(seg, m.end()) if not is_reference else -1
    alts = _alternatives_after(text, sent_at + len(seg)) if sent_at >= 0 else []
    plain = _sub_math(seg, lambda inner: " ")
    if re.search(r"\s(?:is|are|equals|be)\s", plain) and not _is_one_block(seg.strip()):
        tail = re.split(r"\s(?:is|are|equals|be)\s", seg)[-1]
        seg = tail.strip()
    ans = unwrap_math(seg).strip(" .\"'")
    ans, hedge = _unhedged(ans) if not is_reference else (ans, False)
    return Extracted(ans, how="phrase", lead=text[max(0, m.end() - 60) : m.end()], hedged=hedge, alts=alts)


def _last_value(text: str) -> Extracted:
    """The fallback: the latest of the last math block, the last number and the last number in words."""
    cands = []
    blocks = _math_blocks(text)
    if blocks:
        run = _or_run(text, blocks)
        ans = " or ".join(b[2].strip().rstrip(".") for b in run)
        cands.append((blocks[-1][1], ans, "last math block" if len(run) == 1 else "math blocks joined by or", run[0][0]))
    nums = list(_NUMBER_RE.finditer(text))
    if nums:
        cands.append((nums[-1].end(), nums[-1].group(0).strip(), "last number", nums[-1].start()))
    # a number in words counts when its sentence has no digits ("... so she has twelve left", but not
    # "there are 12 sequences for the three conditions"); "one" alone is too often a pronoun
    words = [r for r in find_number_words(text) if r.words > 1 or r.value not in ("1", "0")]
    if words and not any(c.isdigit() for c in _sentence_around(text, words[-1].start, words[-1].end)):
        cands.append((words[-1].end, words[-1].value, "last number in words", words[-1].start))
    if not cands:
        return Extracted(None, how="no final answer")
    end, ans, how, start = max(cands, key=lambda c: (c[0], c[2] == "last math block"))
    if _HEDGE_RE.search(_clause_before(text, start)):
        return Extracted(None, how=f"hedged {how}")  # "I get 7, not 5.", "it is 5 or 7", "at least 12"
    return Extracted(ans, how=how, lead=text[max(0, start - 60) : start], hedged=hedged(ans),
                     alts=_alternatives_after(text, end))


def _unhedged(ans: str) -> tuple[str, bool]:
    """A phrase or bare answer and whether it hedges; '7, not 5' is read as '7' (not hedged)."""
    if not hedged(ans):
        return ans, False
    kept = _negated_tail(ans)
    return (kept, False) if kept is not None else (ans, True)


_OR_ONLY = re.compile(r"\s*,?\s*(?:or|\\text\{\s*or\s*\})\s*", re.I)


def _or_run(text: str, blocks: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The last math block and the blocks before it joined only by "or" ("$x<-2$ or $x>2$"): one
    answer, as boxes joined by "or" are (bounded: at most 16 blocks)."""
    run = [blocks[-1]]
    for b in reversed(blocks[:-1]):
        between = text[b[1] : run[0][0]]
        if len(run) >= 16 or len(between) > 40 or not _OR_ONLY.fullmatch(between):
            break
        run.insert(0, b)
    return run


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence (or line) holding text[start:end]."""
    a = max(text.rfind(c, 0, start) for c in ".!?\n")
    ends = [i for i in (text.find(c, end) for c in ".!?\n") if i >= 0]
    return text[a + 1 : min(ends) if ends else len(text)]


def gsm8k_answer(text: str) -> str | None:
    """The '#### 72' answer line of GSM8K (reference fields and models trained on them): the last
    '####' whose line is the text's last and holds a short answer with a digit (not a heading)."""
    h = text.rfind("####")
    if h < 0:
        return None
    rest = text[h + 4 :].strip()
    if not rest or "\n" in rest or len(rest) > 200 or not any(c.isdigit() for c in rest) or is_prose(rest):
        return None
    return unwrap_math(rest).rstrip(" .")


# a verification after the answer: "x = 4. Check: 2(4)+1 = 9" (at a sentence or line start)
_VERIFY_RE = re.compile(
    r"(?:(?:^|(?<=[.!?:;\n]))[ \t*#]*(?:(?:let'?s|let\s+me|we\s+can|to|now|quick(?:ly)?|and)\s+)?"
    r"(?:double[- ]check|check(?:ing)?|verif(?:y|ying|ication)|sanity[- ]check|plug(?:ging)?\s+(?:back|in)"
    r"|substitut(?:e|ing)\s+(?:back|it|this|[a-z](?=\s*=)))"
    r"|(?<=\s)(?-i:Check|Checking|Verify|Verification)(?=\s*:))\b",  # "x = 4 Check: ..." (no full stop)
    re.IGNORECASE | re.MULTILINE,
)
_CONCLUDE_RE = re.compile(r"\b(?:so|therefore|thus|hence|the\s+answer|final)\b|∴", re.IGNORECASE)
_STATED_RE = re.compile(r"=|\b(?:is|are|so|thus|therefore|hence|gives?|get|got|equals|total)\b", re.IGNORECASE)
_THEN_RE = re.compile(r"\b(?:then|which|giving|gives|sum|product|total)\b", re.IGNORECASE)
_NUM_TOKEN = re.compile(r"\d+(?:\.\d+)?")


def cut_verification(text: str) -> str:
    """The text before a trailing verification of the answer, when there is one.

    The last verification marker counts when (1) no conclusion ("so", "therefore", "the answer")
    follows it, (2) what precedes it states a result, (3) it re-uses the last number stated before it
    (it checks that value) and (4) after its first sentence no new number appears ("... = 7. Hmm,
    wrong; x = 4." is a change of mind, not a check); otherwise the text is returned whole."""
    last = None
    for m in _VERIFY_RE.finditer(text):
        last = m
    if last is None:
        return text
    head, tail = text[: last.start()], text[last.start() :]
    if _CONCLUDE_RE.search(tail[len(last.group(0)):]):
        return text
    if not _STATED_RE.search(_sentence_around(head, max(0, len(head.rstrip(" .!?\n")) - 1), len(head))):
        return text  # what precedes the check is not a stated result ("Let me compute 5*6. Check: ...")
    nums = _NUM_TOKEN.findall(head)
    if not nums or nums[-1] not in _NUM_TOKEN.findall(tail):
        return text
    first = _sentence(tail)
    seen = set(_NUM_TOKEN.findall(first)) | {nums[-1]}
    rest = tail[tail.find(first) + len(first) :] if first else ""
    if any(x not in seen for x in _NUM_TOKEN.findall(rest)):
        return text
    return head


_SOLUTIONS_RE = re.compile(
    r"\b(?:roots?|solutions?|zeros?|zeroes|x-intercepts?|values|numbers|answers)\b[^.\n$]{0,40}?\b(?:are|is)\b\s*:?"
    r"|\b(?:roots?|solutions?)\s*:|\bin\s+(?:increasing|decreasing|ascending|descending)\s+order\s*:",
    re.IGNORECASE,
)


def _solutions_phrase(text: str) -> Extracted | None:
    """'... the roots are 3 and -1.' in prose with no number after that sentence: the whole list."""
    last = None
    for m in _SOLUTIONS_RE.finditer(text):
        last = m
    if last is None:
        return None
    seg = _sentence(_clean_segment(text[last.end() :]))
    if not seg or not any(c.isdigit() for c in seg):
        return None
    after = text[last.end() :]
    pos = after.find(seg)
    if pos < 0 or any(c.isdigit() for c in after[pos + len(seg) :]):
        return None
    plain = _sub_math(seg, lambda inner: " ")
    if re.search(r"\s(?:is|are|equals|be)\s", plain) or _CONCLUDE_RE.search(plain) or _THEN_RE.search(plain):
        return None  # "3 and 4, so a+b = 7": the sentence goes on to another result
    return Extracted(unwrap_math(seg).strip(" .\"'"), how="solutions phrase", lead=text[max(0, last.end() - 60) : last.end()])


def _only_number_words(text: str) -> bool:
    """'twenty-one', 'three fifths': a bare answer written in words."""
    runs = find_number_words(text)
    return len(runs) == 1 and runs[0].start == 0 and not text[runs[0].end :].strip(" .")
