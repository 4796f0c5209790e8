"""Finals for people on the server's protocols: the formatting off the event loop, and the
fields it adds to a reply.

The connection (``Connection.text_format``: the connection's ``text_format`` option, else
the server's) formats each final before the protocol session sees it; the sessions add the
fields. A formatted final gets ``display``
(its text for people) and ``display_words`` (``{"word", "start", "end", "conf"}`` per
formatted word, times in seconds as the protocol's own word times are); ``text`` and the
protocol's own fields stay as they were. A final of a second pass
(``streamdec.core.second_pass``) also gets ``second_pass`` (``done``, ``rejected`` or
``skipped``; of several merged finals, the first that is not ``done``) and ``first_pass``
(the first pass's text).
"""

from __future__ import annotations

import asyncio

from ..core.results import Result
from ..errors import ClientError, StreamdecError
from ..textfmt import default_formatter

__all__ = ["formatted", "display_fields"]


async def formatted(result: Result, level: str) -> Result:
    """``result`` formatted at ``level`` (in a worker thread: a final takes milliseconds);
    ClientError ``decode_failed`` when the formatting models cannot be used."""
    if level == "raw" or not result.is_final:
        return result
    try:
        return await asyncio.to_thread(default_formatter().apply, result, level)
    except StreamdecError as e:
        raise ClientError("decode_failed", f"text_format {level}: {e}") from None


def display_fields(results: list[Result], offset: float = 0.0) -> dict:
    """``display``/``display_words`` of formatted finals (joined by a space; word times
    plus ``offset`` seconds); empty when none is formatted."""
    out = {}
    second = [r for r in results if r.second_pass]
    if second:
        statuses = [r.second_pass for r in second]
        out = {"second_pass": next((s for s in statuses if s != "done"), "done"),
               "first_pass": " ".join(r.first_pass.text for r in second if r.first_pass.text)}
    shown = [r for r in results if r.display is not None]
    if not shown:
        return out
    return out | {"display": " ".join(r.display for r in shown if r.display),
            "display_words": [{"word": w.text, "start": round(w.start + offset, 6),
                               "end": round(w.end + offset, 6), "conf": w.conf}
                              for r in shown for w in r.display_words]}
