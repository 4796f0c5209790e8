"""Inverse text normalisation of English finals: spoken words -> written tokens.

The rewriting is WeTextProcessing's English inverse-normalisation grammar (the
``wetextprocessing`` package, Apache-2.0; weighted FSTs run by ``pynini``): cardinals,
ordinals, decimals, dates, times, money, measures, telephone numbers, spelled letters and
digits. Its two FSTs, as the pinned release builds them, ship in ``assets/itn/`` and are
loaded, never built, at run time (``build_fsts`` makes them again).

On top of the grammar's output, one small layer of written-style choices (``_restyle``),
each applied to whole tokens:

- a time's hour loses its leading zero (``05:30`` -> ``5:30``), and a whole hour before
  ``a.m.``/``p.m.`` loses ``:00`` (``10:00 a.m.`` -> ``10 a.m.``);
- a ``%`` token joins the number before it (``25 %`` -> ``25%``);
- spelled letters are upper case: a token of letters and digits made of two or more
  one-letter spoken words (``a b c one two`` -> ``ABC12``; not ``p m`` -> ``p.m.``), and a
  run of two or more one-letter tokens, which are joined (``j k`` -> ``JK``).
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Sequence

from ..errors import ModelLoadError
from .align import align

__all__ = ["InverseNormalizer", "FST_DIR", "build_fsts", "WETEXT_VERSION"]

FST_DIR = Path(__file__).resolve().parent.parent / "assets" / "itn"
WETEXT_VERSION = "1.2.0"  # the release whose grammar built the shipped FSTs
_PREFIX = "en_itn"
_ZERO_HOUR = re.compile(r"^0(\d):(\d\d)$")
_WHOLE_HOUR = re.compile(r"^(\d{1,2}):00$")
_MERIDIEM = ("a.m.", "p.m.")


def _wetext(directory: Path, build: bool):
    try:
        from itn.english.inverse_normalizer import InverseNormalizer as WeText
    except ImportError as e:
        raise ModelLoadError(f"inverse text normalisation (text_format full) needs the "
                             f"wetextprocessing package (python3 -m pip install -e '.[text]' "
                             f"in the streamdec folder), or use text_format punct or raw "
                             f"({e})") from None
    logging.getLogger("wetext").setLevel(logging.WARNING)  # its per-load info lines
    if not build:
        missing = [p for p in (f"{_PREFIX}_tagger.fst", f"{_PREFIX}_verbalizer.fst")
                   if not (directory / p).is_file()]
        if missing:
            raise ModelLoadError(f"inverse text normalisation FSTs missing in {directory}: "
                                 f"{', '.join(missing)}")
    return WeText(cache_dir=str(directory), overwrite_cache=build)


def build_fsts(directory: Path) -> None:
    """Build the grammar's FSTs into ``directory`` (a few seconds)."""
    _wetext(Path(directory), build=True)


class InverseNormalizer:
    """Spoken words -> written tokens with the spoken words each came from.

    Shared and stateless across streams; pynini's FSTs are used under a lock (one
    rewrite at a time per process)."""

    def __init__(self, directory: Path = FST_DIR):
        self._wetext = _wetext(Path(directory), build=False)
        self._lock = threading.Lock()

    def __call__(self, words: Sequence[str]) -> list[tuple[str, int, int]]:
        """``words`` (any case) -> [(token, first word, last word)] in order; every word is
        in one span. Digits, dates, money and times come out written; other words lower
        case, spelled letters upper case."""
        spoken = [w.lower() for w in words]
        if not spoken:
            return []
        with self._lock:
            out = self._wetext.normalize(" ".join(spoken))
        written = out.split()
        if not written:
            return [(w, i, i) for i, w in enumerate(spoken)]
        spans = align(spoken, written)
        return _restyle([(t, a, b) for t, (a, b) in zip(written, spans)], spoken)


def _letters(spoken: Sequence[str], a: int, b: int) -> int:
    """How many of the spoken words ``a..b`` are single letters."""
    return sum(len(w) == 1 and w.isalpha() for w in spoken[a:b + 1])


def _restyle(tokens: list[tuple[str, int, int]], spoken: Sequence[str]
             ) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for n, (text, a, b) in enumerate(tokens):
        following = tokens[n + 1][0] if n + 1 < len(tokens) else ""
        text = _ZERO_HOUR.sub(r"\1:\2", text)
        if following in _MERIDIEM:
            text = _WHOLE_HOUR.sub(r"\1", text)
        if text == "%" and out:
            prev, pa, _ = out.pop()
            out.append((prev + "%", pa, b))
            continue
        spelled = text.isalpha() and _letters(spoken, a, b) == b + 1 - a
        if spelled and out and out[-1][0].isalpha() and \
                _letters(spoken, out[-1][1], out[-1][2]) == out[-1][2] + 1 - out[-1][1]:
            prev, pa, _ = out.pop()  # spelled letters in a row: one token
            text, a = prev + text, pa
        out.append((text, a, b))
    return [(t.upper() if t.isalnum() and _letters(spoken, a, b) >= 2 else t, a, b)
            for t, a, b in out]
