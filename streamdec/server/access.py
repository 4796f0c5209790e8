"""Who may connect: bearer tokens and the connection cap.

``Access.check`` is pure over a request's headers and query: it returns None (admitted) or
the ``Refusal`` (HTTP status and reason) the handshake answers with:

- 401 when tokens are configured and the request has none or a wrong one
  (``Authorization: Bearer TOKEN``, or ``?token=TOKEN`` for browsers, which cannot set
  headers on a WebSocket);
- 503 while the server drains (shutting down) or when ``max_connections`` are open.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import ConfigError

__all__ = ["Refusal", "Access", "read_tokens"]


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


def read_tokens(path: str | Path) -> frozenset[str]:
    """Tokens of a token file: one per line; blank lines and ``#`` comments are skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"server.token_file {path}: {e.strerror or e}") from None
    tokens = frozenset(t.strip() for t in lines if t.strip() and not t.lstrip().startswith("#"))
    if not tokens:
        raise ConfigError(f"server.token_file {path}: holds no token")
    return tokens


def _presented(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization")
    if auth is not None:
        scheme, _, token = auth.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None
    return query.get("token")


class Access:
    """Admission of connections: tokens, the cap and the drain state."""

    def __init__(self, tokens: frozenset[str] | None, max_connections: int,
                 share=None) -> None:
        self.tokens = tokens
        self.max_connections = max_connections
        self.open = 0  # admitted here and not released yet
        self.draining = False
        # one worker of several (a ``ServerShare``): the cap counts every worker's connections
        self._share = share

    def authorized(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        if not self.tokens:
            return True
        token = _presented(headers, query)
        # compare with every token, in constant time for each
        return token is not None and any(
            hmac.compare_digest(token.encode(), t.encode()) for t in self.tokens)

    def check(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Refusal | None:
        if not self.authorized(headers, query):
            return Refusal(401, "missing or invalid bearer token (Authorization: Bearer "
                                "TOKEN, or ?token=TOKEN)")
        reason = self.capacity_refusal()
        return None if reason is None else Refusal(503, reason)

    def capacity_refusal(self) -> str | None:
        """Why a connection would be refused (503) whoever it is: draining, or the cap."""
        if self.draining:
            return "server is shutting down"
        total = self.open if self._share is None else self._share.connections
        if total >= self.max_connections:
            return (f"server is at its limit of {self.max_connections} connections; "
                    "retry later")
        return None

    def admit(self) -> None:
        self.open += 1
        if self._share is not None:
            self._share.admit()

    def release(self) -> None:
        self.open -= 1
        if self._share is not None:
            self._share.release()
