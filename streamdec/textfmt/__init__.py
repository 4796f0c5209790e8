"""Text for people: a final's words -> punctuated, cased, written text with word times.

``format_words`` (``format.py``) is the pure function; ``TextFormatter`` holds the two
shared models it uses (``PunctCaseTagger``, ``InverseNormalizer``: loaded once, on first
use) and applies it to results (``Result.display`` / ``Result.display_words``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import threading

from ..core.results import Result
from .format import TEXT_FORMATS, Formatted, check_text_format, format_words

__all__ = ["TEXT_FORMATS", "Formatted", "check_text_format", "format_words",
           "TextFormatter", "default_formatter", "itn_available"]


def itn_available() -> bool:
    """Whether the inverse text normalisation library (WeTextProcessing, the ``text``
    extra) that ``full`` needs is installed (looked up, not imported)."""
    return importlib.util.find_spec("itn") is not None


class TextFormatter:
    """Formats finals with the shipped models; shared by all streams of a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tagger = None
        self._itn = None

    def _models(self, level: str):
        with self._lock:
            if self._tagger is None:
                from .punct import PunctCaseTagger
                self._tagger = PunctCaseTagger()
            if level == "full" and self._itn is None:
                from .itn import InverseNormalizer
                self._itn = InverseNormalizer()
        return self._tagger.tag, self._itn

    def load(self, level: str) -> None:
        """Load what ``level`` needs now (ModelLoadError when it cannot be loaded)."""
        if check_text_format(level) != "raw":
            self._models(level)

    def format(self, words, level: str) -> Formatted:
        if check_text_format(level) == "raw":
            return format_words(words, "raw")
        tagger, itn = self._models(level)
        return format_words(words, level, tagger, itn)

    def apply(self, result: Result, level: str) -> Result:
        """``result`` with ``display``/``display_words`` when it is a final with words and
        ``level`` is not ``raw``; otherwise ``result`` itself."""
        if (check_text_format(level) == "raw" or not result.is_final or not result.words
                or result.display is not None):  # a second pass's text is formatted already
            return result
        formatted = self.format(result.words, level)
        return dataclasses.replace(result, display=formatted.text,
                                   display_words=formatted.words)


@functools.lru_cache(maxsize=1)
def default_formatter() -> TextFormatter:
    """The process's one formatter (models load on first use)."""
    return TextFormatter()
