"""Live captions on a terminal: the open segment's partial text on one line, rewritten in
place, its stable part (``Result.stable_chars``: what will not change any more) in normal
intensity and the rest dim, and each final committed as a line of its own. Off a terminal
(a pipe, a file) only the finals are written."""

from __future__ import annotations

import shutil
from typing import TextIO

from ..core.results import Result
from ..files.formats import shown_text

__all__ = ["LiveLine", "DIM", "NORMAL"]

DIM, NORMAL = "\033[2m", "\033[22m"  # SGR faint / normal intensity


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(max(0.0, seconds), 60)
    return f"{int(minutes):02d}:{seconds:05.2f}"


class LiveLine:
    """Shows results as they come: ``line(source, result)``. With ``times`` each final line
    starts with ``[mm:ss.ss - mm:ss.ss]``, when its words began and ended; with ``prefix``
    each line starts with ``source: `` (several files)."""

    def __init__(self, out: TextIO, times: bool = False, prefix: bool = False) -> None:
        self.out = out
        self.tty = out.isatty()
        self.times = times
        self.prefix = prefix

    def __call__(self, source: str, event: Result) -> None:
        shown = shown_text(event)  # a formatted final's text for people
        text = f"{source}: {shown}" if self.prefix else shown
        if event.is_final:
            if self.tty:
                self.out.write("\r\033[K")
            if event.text:
                self.out.write(self._final(event, text) + "\n")
        elif self.tty:
            width = shutil.get_terminal_size().columns - 1
            shown = text[-width:]
            # the unstable part: the last len(event.text) - stable_chars characters
            split = max(0, len(shown) - (len(event.text) - event.stable_chars))
            steady, moving = shown[:split], shown[split:]
            self.out.write("\r\033[K" + steady + (DIM + moving + NORMAL if moving else ""))
        self.out.flush()

    def note(self, source: str, text: str) -> None:
        """A line of its own (a keyword heard) under the finals; the open partial is
        shown again with the next result."""
        if self.tty:
            self.out.write("\r\033[K")
        self.out.write((f"{source}: {text}" if self.prefix else text) + "\n")
        self.out.flush()

    def _final(self, event: Result, text: str) -> str:
        if not self.times:
            return text
        start, end = event.span
        return f"[{_clock(start)} - {_clock(end)}] {text}"
