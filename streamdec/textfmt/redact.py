"""Redaction: payment card numbers, US social security numbers and configured patterns
in a result's words, replaced by a marker (pure: no I/O).

    rules = RedactionRules(cards=True, ssn=True, patterns=(r"\\bpin \\w+",))
    redact_result(result, rules) -> Result      # the same result when nothing matched

What is a number: a word that is a digit written out (``zero``/``oh`` .. ``nine``, any
case: the model's raw text) or digits with separators (``4111``, ``4111-1111``,
``123-45-6789``: formatted text after inverse text normalisation). Consecutive such words
make a run, read as one string of digits; a word that sounds like a digit (``for``,
``to``, ``too``, ``won``, ``ate``: what a recogniser writes for a digit it misheard) counts
as that digit between two number words:

- a card number: any consecutive words of a run whose digits are 13 to 19 long and pass
  the Luhn check (ISO/IEC 7812), as a card number read in groups or digit by digit;
- a social security number: a whole run of 9 digits with the structure the Social
  Security Administration issues (area not 000, 666 or 900-999; group not 00; serial not
  0000); a run of another length (a phone number, an amount) is left alone;
- a pattern: a regular expression (case-insensitive) over the words joined by spaces;
  every word it touches is redacted.

A partial is cut off mid-number while the caller speaks: in a partial, a run of at least
``PENDING_DIGITS`` digits that reaches its last word, or the word before it (the last may
be a digit half heard: ``ON``), is redacted too, with that last word (it may still become a
card number), so that a card is not read out digit by digit before its final comes.

Each redacted word becomes ``marker`` with its times and confidence kept. The raw words
and the formatted words of a final are redacted each on its own and then across: a word
of one whose time overlaps a redacted word of the other is redacted too (a number that
only the formatted text shows as digits is not left spoken in the raw text). Tokens that
fall inside a redacted word's time are removed with their times and log-probs; n-best
alternatives are dropped; a redacted partial's stable prefix starts over (0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Sequence

from ..core.results import Result, Word
from ..errors import ConfigError

__all__ = ["RedactionRules", "redact_words", "redact_result", "luhn_valid", "ssn_valid",
           "word_digits", "MARKER", "KINDS", "parse_kinds"]

MARKER = "[redacted]"
SPOKEN = {"zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3",
          "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9"}
#: words that sound like a digit: counted as it between two number words
SOUNDS_LIKE = {"for": "4", "to": "2", "too": "2", "won": "1", "ate": "8"}
PENDING_DIGITS = 6
_DIGITS = re.compile(r"^\d[\d\- ]*$")
_EDGE = ".,;:!?\"'()"
#: what may be named for redaction (``parse_kinds``)
KINDS = ("cards", "ssn")


def parse_kinds(text: str, where: str = "redact") -> frozenset[str]:
    """``cards,ssn`` -> the kinds named (``all``: every kind; ``""`` or ``off``: none);
    ConfigError for an unknown name."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    if names <= {"off"}:
        return frozenset()
    if names == {"all"}:
        return frozenset(KINDS)
    unknown = sorted(names - set(KINDS))
    if unknown:
        raise ConfigError(f"{where}: unknown kind(s) {', '.join(unknown)} (one or more of "
                          f"{', '.join(KINDS)}, or all, or off)")
    return frozenset(names)


@dataclass(frozen=True)
class RedactionRules:
    cards: bool = True  # payment card numbers (13-19 digits passing the Luhn check)
    ssn: bool = True  # US social security numbers (9 digits, as issued)

    @classmethod
    def of(cls, kinds: frozenset[str], patterns: tuple[str, ...] = ()) -> "RedactionRules":
        """The rules for ``kinds`` (``parse_kinds``) and ``patterns``."""
        return cls(cards="cards" in kinds, ssn="ssn" in kinds, patterns=patterns)
    patterns: tuple[str, ...] = ()  # regular expressions (case-insensitive)
    marker: str = MARKER  # what a redacted word becomes

    def __post_init__(self) -> None:
        for pattern in self.patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ConfigError(f"redaction pattern {pattern!r}: {e}") from None
        if not self.marker or any(c.isspace() for c in self.marker):
            raise ConfigError(f"redaction marker must be one word, got {self.marker!r}")

    @property
    def active(self) -> bool:
        return self.cards or self.ssn or bool(self.patterns)


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of digits (the last digit is the check digit)."""
    total = 0
    for n, c in enumerate(reversed(digits)):
        d = int(c)
        if n % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def ssn_valid(digits: str) -> bool:
    """Whether 9 digits have the structure of an issued US social security number."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return (len(digits) == 9 and area not in ("000", "666") and area[0] != "9"
            and group != "00" and serial != "0000")


def word_digits(word: str) -> str | None:
    """The digits a word stands for (``four`` -> ``4``, ``4111-1111`` -> ``41111111``);
    None when it is not a number."""
    w = word.strip(_EDGE).lower()
    if w in SPOKEN:
        return SPOKEN[w]
    if _DIGITS.match(w):
        return re.sub(r"\D", "", w)
    return None


def _numbers(words: Sequence[str], rules: RedactionRules, partial: bool = False) -> set[int]:
    out: set[int] = set()
    digits = [word_digits(w) for w in words]
    for k in range(1, len(words) - 1):
        sound = SOUNDS_LIKE.get(words[k].strip(_EDGE).lower())
        if sound and digits[k] is None and digits[k - 1] and digits[k + 1]:
            digits[k] = sound
    n = 0
    while n < len(words):
        if digits[n] is None:
            n += 1
            continue
        end = n
        while end < len(words) and digits[end] is not None:
            end += 1
        run = range(n, end)  # words n .. end-1 are a run of numbers
        if (partial and end >= len(words) - 1 and (rules.cards or rules.ssn)
                and sum(len(digits[k]) for k in run) >= PENDING_DIGITS):
            out.update(range(n, len(words)))
        if rules.ssn:
            whole = "".join(digits[k] for k in run)
            if len(whole) == 9 and ssn_valid(whole):
                out.update(run)
        if rules.cards:
            for i in run:
                text = ""
                for j in range(i, end):
                    text += digits[j]
                    if len(text) > 19:
                        break
                    if len(text) >= 13 and luhn_valid(text):
                        out.update(range(i, j + 1))
        n = end
    return out


def _patterns(words: Sequence[str], rules: RedactionRules) -> set[int]:
    out: set[int] = set()
    if not rules.patterns:
        return out
    starts, pos = [], 0
    for w in words:
        starts.append(pos)
        pos += len(w) + 1
    text = " ".join(words)
    for pattern in rules.patterns:
        for m in re.finditer(pattern, text, re.IGNORECASE):
            if m.end() == m.start():
                continue
            for k, start in enumerate(starts):
                if start < m.end() and m.start() < start + len(words[k]):
                    out.add(k)
    return out


def redact_words(words: Sequence[str], rules: RedactionRules, partial: bool = False
                 ) -> set[int]:
    """The indices of ``words`` to redact (``partial``: the words of a partial result, which
    may end inside a number)."""
    if not rules.active:
        return set()
    return _numbers(words, rules, partial) | _patterns(words, rules)


def _overlapping(words: Sequence[Word], redacted: Sequence[Word]) -> set[int]:
    return {k for k, w in enumerate(words)
            if any(w.start < r.end and r.start < w.end for r in redacted)}


def _marked(words: Sequence[Word], which: set[int], marker: str) -> tuple[Word, ...]:
    return tuple(Word(marker, w.start, w.end, w.conf) if k in which else w
                 for k, w in enumerate(words))


def _joined(words: Sequence[Word]) -> str:
    return " ".join(w.text for w in words)


def redact_result(result: Result, rules: RedactionRules) -> Result:
    """``result`` with its redacted words replaced by ``rules.marker`` in ``text``,
    ``words``, ``display`` and ``display_words`` (see the module notes); the same object
    when nothing is redacted."""
    if not rules.active or not result.text:
        return result
    raw_words = result.words or tuple(Word(w, result.start_time, result.end_time, 1.0)
                                      for w in result.text.split())
    raw = redact_words([w.text for w in raw_words], rules, not result.is_final)
    shown = result.display_words if result.display is not None else ()
    fmt = redact_words([w.text for w in shown], rules) if shown else set()
    if result.words and shown:  # across, by time
        raw |= _overlapping(raw_words, [shown[k] for k in fmt])
        fmt |= _overlapping(shown, [raw_words[k] for k in raw])
    if not raw and not fmt:
        return result
    new_raw = _marked(raw_words, raw, rules.marker)
    changes = dict(text=_joined(new_raw), alternatives=(), stable_tokens=0, stable_chars=0)
    if result.words:
        changes["words"] = new_raw
    if result.is_final:
        changes.update(stable_chars=len(changes["text"]))
    if shown:
        new_shown = _marked(shown, fmt, rules.marker)
        changes.update(display=_joined(new_shown), display_words=new_shown)
    gone = [raw_words[k] for k in raw]
    if result.tokens and raw and not result.words:  # no times to place them by: all go
        changes.update(tokens=(), token_ids=(), timestamps=(), log_probs=())
    elif result.tokens and gone:
        keep = [n for n, t in enumerate(result.absolute_timestamps)
                if not any(w.start <= t < w.end for w in gone)]
        changes.update(tokens=tuple(result.tokens[n] for n in keep),
                       token_ids=tuple(result.token_ids[n] for n in keep),
                       timestamps=tuple(result.timestamps[n] for n in keep),
                       log_probs=tuple(result.log_probs[n] for n in keep))
        if result.is_final:
            changes["stable_tokens"] = len(keep)
    return replace(result, **changes)
