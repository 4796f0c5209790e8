"""Who may connect: bearer tokens and the connection cap.

``Access.check`` is pure over a request's headers and query: it returns None (admitted) or
the ``Refusal`` (HTTP status and reason) the handshake answers with:

- 401 when tokens are configured and the request has none or a wrong one
  (``Authorization: Bearer TOKEN`` or ``Authorization: Token TOKEN``, as Deepgram's
  clients send it, or ``Authorization: TOKEN``, as AssemblyAI's do, or ``?token=TOKEN``
  for browsers, which cannot set headers on a WebSocket);
- 503 while the server drains (shutting down), when ``max_connections`` are open, or
  while the server is behind its audio (``overload_check``: a ready stream has waited over
  ``max_decode_delay_ms`` for its decode; taking more streams would delay every stream).

Twilio Media Streams can send neither a header of our choosing nor a query string (the
``<Stream>`` URL takes none); Twilio signs its handshake instead, and its documentation asks
the server to check that: ``X-Twilio-Signature`` is the base64 HMAC-SHA1 of the stream's URL
(as written in the TwiML; a WebSocket handshake has no POST parameters to append), keyed with
the account's auth token. ``Access.check_twilio`` admits ``/twilio`` by that signature when
``server.twilio_auth_token_file`` is set (403 when it does not match), or by a bearer token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..errors import ConfigError

__all__ = ["Refusal", "Access", "overload_check", "read_tokens", "read_secret", "TwilioAuth",
           "twilio_signature", "TWILIO_SIGNATURE_HEADER"]

TWILIO_SIGNATURE_HEADER = "x-twilio-signature"


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str

    @property
    def headers(self) -> dict[str, str]:
        """The ``Hint`` header of a handshake refused with this: the reason in ASCII (a
        header is latin-1: other characters, a client's ``▁`` or ``€``, as escapes)."""
        return {"Hint": self.reason.encode("ascii", "backslashreplace").decode()}


def read_tokens(path: str | Path, what: str = "server.token_file") -> frozenset[str]:
    """Tokens of a token file: one per line; blank lines and ``#`` comments are skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"{what} {path}: {e.strerror or e}") from None
    tokens = frozenset(t.strip() for t in lines if t.strip() and not t.lstrip().startswith("#"))
    if not tokens:
        raise ConfigError(f"{what} {path}: holds no token")
    return tokens


def read_secret(path: str | Path, what: str) -> str:
    """The one secret of a file (its first line that is not blank or a ``#`` comment)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"{what} {path}: {e.strerror or e}") from None
    secrets = [t.strip() for t in lines if t.strip() and not t.lstrip().startswith("#")]
    if len(secrets) != 1:
        raise ConfigError(f"{what} {path}: holds {len(secrets)} secrets, not one")
    return secrets[0]


def twilio_signature(auth_token: str, url: str) -> str:
    """``X-Twilio-Signature`` of a request to ``url`` without POST parameters."""
    mac = hmac.new(auth_token.encode(), url.encode(), hashlib.sha1).digest()
    return base64.b64encode(mac).decode()


@dataclass(frozen=True)
class TwilioAuth:
    """Checks ``X-Twilio-Signature``: ``stream_url`` is the ``<Stream>`` URL as written in the
    TwiML (None: the handshake's own, ``wss://`` or ``ws://`` + its Host header, path and
    query; set it when a proxy changes the host or path)."""

    auth_token: str
    stream_url: str | None = None

    def urls(self, headers: Mapping[str, str], path: str, query_string: str) -> list[str]:
        if self.stream_url is not None:
            return [self.stream_url]
        rest = f"{headers.get('host', '')}{path}" + (f"?{query_string}" if query_string else "")
        return [f"wss://{rest}", f"ws://{rest}"]

    def valid(self, headers: Mapping[str, str], path: str, query_string: str) -> bool:
        given = headers.get(TWILIO_SIGNATURE_HEADER)
        if not given:
            return False
        return any(hmac.compare_digest(given.encode(), twilio_signature(self.auth_token, u).encode())
                   for u in self.urls(headers, path, query_string))


def _presented(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization")
    if auth is not None:
        scheme, space, token = auth.strip().partition(" ")
        if not space:  # the key alone: AssemblyAI's clients send it so (``assemblyai``)
            return scheme or None
        # ``Token``: Deepgram's clients send their API key so (``deepgram``)
        return token.strip() if scheme.lower() in ("bearer", "token") else None
    return query.get("token")


def overload_check(delay_seconds: Callable[[], float], limit_ms: float
                   ) -> Callable[[], str | None] | None:
    """``Access``'s ``behind``: a refusal while ``delay_seconds()`` (an engine's
    ``decode_delay``) is over ``limit_ms`` (``server.max_decode_delay_ms``; 0: never)."""
    if limit_ms <= 0:
        return None

    def behind() -> str | None:
        delay = delay_seconds() * 1000
        if delay <= limit_ms:
            return None
        return (f"server is behind its audio: a stream has waited {delay:.0f} ms for its "
                f"decode (server.max_decode_delay_ms = {limit_ms:g}); retry later")
    return behind


class Access:
    """Admission of connections: tokens, the cap and the drain state."""

    def __init__(self, tokens: frozenset[str] | None, max_connections: int,
                 share=None, twilio: TwilioAuth | None = None,
                 behind: Callable[[], str | None] | None = None,
                 readers: frozenset[str] | None = None) -> None:
        """``behind``: why the server is too far behind its audio to take one more stream
        (None: it is not), asked after the cap (``overload_check``); ``readers``: tokens
        that may only read stored transcripts (``may_read``)."""
        self.tokens = tokens
        self.readers = readers
        self.twilio = twilio
        self.max_connections = max_connections
        self._behind = behind
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

    def may_read(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """Whether a request may read stored transcripts: a token of either file (no token
        configured at all: anyone)."""
        known = (self.tokens or frozenset()) | (self.readers or frozenset())
        if not known:
            return True
        token = _presented(headers, query)
        return token is not None and any(
            hmac.compare_digest(token.encode(), t.encode()) for t in known)

    def check(self, headers: Mapping[str, str], query: Mapping[str, str],
              decodes: bool = True) -> Refusal | None:
        """``decodes``: the connection brings audio (False: a call's subscriber, which is
        not refused for the server being behind its audio)."""
        if not self.authorized(headers, query):
            return Refusal(401, "missing or invalid bearer token (Authorization: Bearer "
                                "TOKEN, or ?token=TOKEN)")
        reason = self.capacity_refusal(decodes)
        return None if reason is None else Refusal(503, reason)

    def check_twilio(self, headers: Mapping[str, str], query: Mapping[str, str], path: str,
                     query_string: str) -> Refusal | None:
        """``check`` for ``/twilio``: with a Twilio auth token, a valid signature or a valid
        bearer token admits (no signature nor token configured: open, as ``check``)."""
        if self.twilio is None:
            refusal = self.check(headers, query)
            if refusal is not None and refusal.status == 401:
                return Refusal(401, refusal.reason + "; Twilio sends neither: set "
                                    "server.twilio_auth_token_file to admit it by its signature")
            return refusal
        if not (self.twilio.valid(headers, path, query_string)
                or (self.tokens and self.authorized(headers, query))):
            urls = " or ".join(self.twilio.urls(headers, path, query_string))
            return Refusal(403, f"missing or invalid X-Twilio-Signature (HMAC-SHA1 of {urls} "
                                "with server.twilio_auth_token_file's token)")
        reason = self.capacity_refusal()
        return None if reason is None else Refusal(503, reason)

    def capacity_refusal(self, decodes: bool = True) -> str | None:
        """Why a connection would be refused (503) whoever it is: draining, the cap, or
        (one that ``decodes``) the server behind its audio."""
        if self.draining:
            return "server is shutting down"
        total = self.open if self._share is None else self._share.connections
        if total >= self.max_connections:
            return (f"server is at its limit of {self.max_connections} connections; "
                    "retry later")
        return None if self._behind is None or not decodes else self._behind()

    def admit(self) -> None:
        self.open += 1
        if self._share is not None:
            self._share.admit()

    def release(self) -> None:
        self.open -= 1
        if self._share is not None:
            self._share.release()
