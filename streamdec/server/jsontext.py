"""JSON text from a peer (a Vosk client's commands, Twilio's events, an audio fork's
metadata and notes), read with a bound on its nesting. Pure: no I/O.

Python's ``json`` module recurses once per nested array or object: a message of a few
thousand ``[`` raises ``RecursionError``, not the ``ValueError`` of text that is not
JSON, and a value nested a little less deep than that parses, then fails wherever it is
written out again (a note's data in a subscriber's message). ``loads`` refuses both the
same way: ``ValueError`` for text that is not JSON or nests deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads", "MAX_DEPTH"]

#: arrays / objects inside one another a peer's JSON may hold (Twilio's events: 3)
MAX_DEPTH = 32


def loads(text: str | bytes) -> Any:
    """The JSON value of ``text``; ValueError when it is not JSON or nests deeper than
    ``MAX_DEPTH`` arrays and objects."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} arrays and objects") from None
    level = [value]
    for _ in range(MAX_DEPTH):  # the values inside the arrays and objects of one level
        level = [v for x in level if isinstance(x, (dict, list))
                 for v in (x.values() if isinstance(x, dict) else x)]
        if not level:
            return value
    raise ValueError(f"JSON nested deeper than {MAX_DEPTH} arrays and objects")
