"""Text normalisation to the model's units: uppercase A-Z, apostrophe, single spaces.

Digits become words (``spell_number``), everything else that is not a letter or an
in-word apostrophe becomes a word boundary. The same function normalises training
text, dev references and hypotheses before scoring, so CER/WER compare like with like.
"""

from __future__ import annotations

import re

__all__ = ["normalize", "spell_number", "spell_ordinal", "spell_year"]

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
         "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
         "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = [(10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand")]
_ORDINAL_IRREGULAR = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                      "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    if n >= 100:
        words += [_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(_TENS[n // 10])
        if n % 10:
            words.append(_ONES[n % 10])
    elif n > 0 or not words:
        words.append(_ONES[n])
    return words


def spell_number(n: int) -> str:
    """0 <= n < 10**12 as lowercase words: 1204 -> 'one thousand two hundred four'."""
    if n < 0:
        return "minus " + spell_number(-n)
    words: list[str] = []
    for scale, name in _SCALES:
        if n >= scale:
            words += _below_thousand(n // scale) + [name]
            n %= scale
    if n or not words:
        words += _below_thousand(n)
    return " ".join(words)


def spell_ordinal(n: int) -> str:
    """3 -> 'third', 21 -> 'twenty first', 40 -> 'fortieth'."""
    words = spell_number(n).split()
    last = words[-1]
    if last in _ORDINAL_IRREGULAR:
        words[-1] = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def spell_year(n: int) -> str:
    """1984 -> 'nineteen eighty four', 2005 -> 'two thousand five', 1900 -> 'nineteen hundred'."""
    if 2000 <= n < 2010 or n < 1000 or n >= 10000:
        return spell_number(n)
    hi, lo = divmod(n, 100)
    if lo == 0:
        return spell_number(hi) + " hundred"
    if lo < 10:
        return spell_number(hi) + " oh " + spell_number(lo)
    return spell_number(hi) + " " + spell_number(lo)


_NUMBER = re.compile(r"\d+")
_NOT_UNIT = re.compile(r"[^A-Z' ]+")
_EDGE_APOSTROPHE = re.compile(r"(?<![A-Z])'|'(?![A-Z])")


def _number_words(match: re.Match) -> str:
    digits = match.group(0)
    if len(digits) > 9 or (len(digits) > 1 and digits.startswith("0")):
        return " " + " ".join(_ONES[int(d)] for d in digits) + " "
    value = int(digits)
    if len(digits) == 4 and 1100 <= value <= 2099:
        return " " + spell_year(value) + " "
    return " " + spell_number(value) + " "


def normalize(text: str) -> str:
    """Map free text to the model's units: 'Don't pay $30!' -> "DON'T PAY THIRTY"."""
    text = text.replace("\u2019", "'").replace("`", "'").replace("&", " and ")
    text = _NUMBER.sub(_number_words, text)
    text = _NOT_UNIT.sub(" ", text.upper())
    text = _EDGE_APOSTROPHE.sub(" ", text)
    return " ".join(text.split())
