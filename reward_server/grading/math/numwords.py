"""English number words to digits ("twelve" -> 12, "two hundred and five" -> 205, "three fifths" -> 3/5).

Written by hand (a one-pass scan over the words, no regex over the whole text): the libraries for
this (word2number, text2num) either raise on any word that is not a number or need a language model.
Ordinals ("third" alone, "second") are not numbers here; a fraction word counts only after a count
("two thirds", "one half").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_FRACTIONS = {
    "half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4, "fourths": 4,
    "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7, "eighth": 8, "eighths": 8,
    "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10,
}
_SIGN = {"negative": -1, "minus": -1}
_WORD = re.compile(r"[A-Za-z]+")


@dataclass
class NumberRun:
    start: int  # character span of the words in the text
    end: int
    value: str  # "12", "-3", "3/5"
    words: int  # how many number words


class _Acc:
    """Accumulates one number: total (finished scales) + current (below the next scale)."""

    def __init__(self) -> None:
        self.total = 0
        self.cur = 0
        self.last = ""  # kind of the last word: unit, teen, tens, hundred, scale
        self.any = False

    def add(self, w: str) -> bool:
        """Take word w if it continues the number grammatically."""
        if w in _UNITS:
            v = _UNITS[w]
            if self.last in ("unit", "teen") or (self.last == "tens" and v >= 10) or (self.last == "tens" and v == 0):
                return False
            self.cur += v
            self.last = "teen" if v >= 10 else "unit"
        elif w in _TENS:
            if self.last in ("unit", "teen", "tens"):
                return False
            self.cur += _TENS[w]
            self.last = "tens"
        elif w == "hundred":
            if self.last not in ("unit", "teen", "tens") or self.cur % 100 == 0 or self.cur >= 100:
                return False
            self.cur *= 100
            self.last = "hundred"
        elif w in _SCALES:
            if self.last not in ("unit", "teen", "tens", "hundred") or self.cur == 0:
                return False
            if self.total % (_SCALES[w] * 1000) != 0:  # scales fall: "two million three thousand"
                return False
            self.total += self.cur * _SCALES[w]
            self.cur = 0
            self.last = "scale"
        else:
            return False
        self.any = True
        return True

    @property
    def value(self) -> int:
        return self.total + self.cur


def find_number_words(text: str) -> list[NumberRun]:
    """Every maximal run of number words in text, left to right (one pass over the words)."""
    words = [(m.start(), m.end(), m.group(0).lower()) for m in _WORD.finditer(text)]
    out: list[NumberRun] = []
    i = 0
    n = len(words)
    while i < n:
        start = words[i][0]
        sign = 1
        j = i
        if words[j][2] in _SIGN and j + 1 < n and _joined(text, words[j], words[j + 1]):
            sign = -1
            j += 1
        acc = _Acc()
        end = start
        count = 0
        k = j
        while k < n:
            w = words[k][2]
            if k > j and not _joined(text, words[k - 1], words[k]):
                break
            if w == "and" and acc.last == "hundred" and k + 1 < n and _joined(text, words[k], words[k + 1]) \
                    and (words[k + 1][2] in _UNITS or words[k + 1][2] in _TENS):
                k += 1
                continue
            if not acc.add(w):
                break
            end = words[k][1]
            count += 1
            k += 1
        if not acc.any:
            i += 1
            continue
        value = str(sign * acc.value)
        # "three fifths", "one half": a fraction word after a count below twenty
        if k < n and words[k][2] in _FRACTIONS and _joined(text, words[k - 1], words[k]) and acc.value < 20:
            den = _FRACTIONS[words[k][2]]
            plural = words[k][2].endswith("s")
            if (acc.value == 1) != plural and acc.value != 0:
                value = f"{sign * acc.value}/{den}"
                end = words[k][1]
                count += 1
                k += 1
        out.append(NumberRun(start, end, value, count))
        i = k
    return out


def _joined(text: str, a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    """Two words of one number: only spaces or one hyphen between them."""
    gap = text[a[1] : b[0]]
    return len(gap) <= 3 and gap.strip(" -") == "" and gap.count("-") <= 1


def replace_number_words(text: str) -> str:
    """text with every run of number words written in digits ('' when there is none)."""
    runs = find_number_words(text)
    if not runs:
        return ""
    out = []
    pos = 0
    for r in runs:
        out.append(text[pos : r.start])
        out.append(r.value)
        pos = r.end
    out.append(text[pos:])
    return "".join(out)
