"""The keywords a call spots on each of its legs: the server's ``call_keywords`` with the
call's own (the ``keywords`` setting of ``call_settings``), checked against the model.
Pure: no I/O (the model's units come in as ``symbols``).

A call's own line spelled with the same units as a line of the server's takes its place for
that call (its boost, threshold and text win), so that a keyword added to the server's list
later never ends the calls that already ask for it. A call cannot remove the server's
keywords (a call center's list holds for every call, as the server's ``redact`` does).
"""

from __future__ import annotations

from typing import Sequence

from ..errors import ClientError, ConfigError, TokenizeError
from ..search.keyword_graph import MAX_KEYWORDS, parse_keywords

__all__ = ["server_keywords", "call_keyword_lines", "SERVER_SOURCE"]

#: how errors in the server's list name it
SERVER_SOURCE = "server.call_keywords"


def _spelled(lines: Sequence[str], symbols, config) -> list[tuple[tuple[int, ...], str]]:
    """(units, line) of each keyword line of an already checked list (blank lines out)."""
    out = []
    for line in lines:
        if line.strip():
            [keyword] = parse_keywords([line], symbols, config.boost, config.threshold)
            out.append((keyword.ids, line))
    return out


def server_keywords(lines: Sequence[str], symbols, config) -> tuple[str, ...]:
    """The server's ``call_keywords`` checked against the model (``config``: the
    ``KeywordConfig`` of the defaults); ConfigError naming the line of a bad one."""
    if not lines:
        return ()
    try:
        parse_keywords(lines, symbols, config.boost, config.threshold, source=SERVER_SOURCE)
    except TokenizeError as e:
        raise ConfigError(str(e)) from None
    return tuple(lines)


def call_keyword_lines(server: Sequence[str], own: Sequence[str], where: str, symbols,
                       config) -> tuple[str, ...] | None:
    """The keyword lines a call spots (None: none): ``own`` (the call's, from ``where``)
    first, then those of ``server`` (already checked) that no line of ``own`` spells.
    ClientError ``bad_config`` naming ``where`` and the call's line."""
    if not own:
        return tuple(server) or None
    try:
        parse_keywords(own, symbols, config.boost, config.threshold, source="keywords")
    except (ConfigError, TokenizeError) as e:
        raise ClientError("bad_config", f"{where}: {e}") from None
    mine = {ids for ids, _ in _spelled(own, symbols, config)}
    kept = [line for ids, line in _spelled(server, symbols, config) if ids not in mine]
    if len(mine) + len(kept) > MAX_KEYWORDS:
        raise ClientError("bad_config", f"{where}: keywords: {len(mine)} with the server's "
                                        f"{len(kept)} are more than {MAX_KEYWORDS} keywords")
    return tuple(own) + tuple(kept)
