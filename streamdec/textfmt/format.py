"""A final's text for people: punctuation, casing and written numbers over its words.

``format_words(words, level, tagger, itn)`` is pure given the two shared models:

- ``raw``: the words as recognised (``PLEASE CALL ME BACK AT FIVE THIRTY``);
- ``punct``: punctuation and casing (``Please call me back at five thirty.``);
- ``full``: that, and inverse text normalisation (``Please call me back at 5:30.``).

Every formatted word keeps the times of the spoken words it comes from: it starts when
its first spoken word starts and ends when its last ends; its confidence is the geometric
mean of theirs (as a word's is of its units', ``results.py``). A formatted word takes its
casing from its first spoken word's tag (words of letters only: ``5:30``, ``p.m.``,
``ABC12`` stay as written) and the mark after it from its last word's tag.
Two rules close the tagger's choices: a final starts with a capital and after ``.``/``?``
the next word does too; a final ends with ``.`` unless the tagger put ``.`` or ``?``
there (a ``,`` there becomes ``.``); a word that ends with ``.`` already (``a.m.``) takes
no second one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from ..core.results import Word
from ..errors import ConfigError

__all__ = ["TEXT_FORMATS", "check_text_format", "Formatted", "format_words"]

TEXT_FORMATS = ("raw", "punct", "full")
_ENDS = (".", "?")


def check_text_format(value, where: str = "text_format") -> str:
    """``value`` when it is one of TEXT_FORMATS; ConfigError naming ``where`` otherwise."""
    if value not in TEXT_FORMATS:
        raise ConfigError(f"{where} must be one of {', '.join(TEXT_FORMATS)}; got {value!r}")
    return value


@dataclass(frozen=True)
class Formatted:
    """The text for people of one final and its words (times in seconds, as the input)."""

    text: str
    words: tuple[Word, ...]


def _cased(token: str, casing: str) -> str:
    if casing == "upper" and token.isalpha():
        return token.upper()
    if casing in ("cap", "upper") and token[:1].isalpha():
        return token[0].upper() + token[1:]
    return token


def _conf(words: Sequence[Word]) -> float:
    if any(w.conf <= 0 for w in words):
        return 0.0
    return round(math.exp(sum(math.log(w.conf) for w in words) / len(words)), 6)


def format_words(words: Sequence[Word], level: str,
                 tagger: Callable[[Sequence[str]], list[tuple[str, str]]] | None = None,
                 itn: Callable[[Sequence[str]], list[tuple[str, int, int]]] | None = None,
                 ) -> Formatted:
    """``words`` of a final at ``level`` (one of TEXT_FORMATS). ``tagger``: spoken words ->
    (mark, casing) per word (``PunctCaseTagger.tag``), needed unless ``raw``; ``itn``:
    spoken words -> (token, first word, last word) (``InverseNormalizer``), needed for
    ``full``."""
    check_text_format(level, "level")
    if level == "raw" or not words:
        return Formatted(" ".join(w.text for w in words), tuple(words))
    spoken = [w.text for w in words]
    tags = tagger(spoken)
    tokens = itn(spoken) if level == "full" else [(w.lower(), i, i)
                                                  for i, w in enumerate(spoken)]
    out: list[Word] = []
    for n, (token, a, b) in enumerate(tokens):
        mark, casing = tags[b][0], tags[a][1]
        if not token.replace("'", "").isalpha():  # 5:30, p.m., ABC12: as written
            casing = "lower"
        if (n == 0 or out[-1].text.endswith(_ENDS)) and casing == "lower":
            casing = "cap"
        if n == len(tokens) - 1 and mark not in _ENDS:
            mark = "."
        if mark == "." and token.endswith("."):  # "a.m." ends a sentence as it is
            mark = ""
        span = words[a:b + 1]
        out.append(Word(_cased(token, casing) + mark, start=span[0].start,
                        end=span[-1].end, conf=_conf(span)))
    return Formatted(" ".join(w.text for w in out), tuple(out))
