"""Stored transcripts over HTTP (``streamdec.records``), behind the server's tokens: a
token of ``token_file`` or of ``read_token_file`` (read only) may read; only a token of
``token_file`` may delete (no token configured: anyone may).

=========================================  ====================================================
route                                      what
=========================================  ====================================================
GET ``/calls/{id}/transcript``             a call's transcript (every session of that call id)
GET ``/streams/{id}/transcript``           a WebSocket stream's (its id: the
                                           ``X-Streamdec-Stream-Id`` header of its handshake)
  ``?format=json|text|srt|vtt``            JSON (default: status, sessions, finals with words,
                                           keywords heard), the text, or subtitles
                                           (``files.formats``)
  ``?from_segment=N``                      only the finals from segment N on
DELETE ``/calls/{id}/transcript``,         erase it (logged in the store's deletions and in the
``/streams/{id}/transcript``               log): ``{"sessions", "finals"}`` deleted
GET ``/transcripts``                       sessions, oldest first: ``kind`` (call, stream),
                                           ``status`` (running, ended, failed, cut), ``since``
                                           / ``until`` (epoch seconds), ``meta.KEY=VALUE``
                                           (metadata, ``meta.customParameters.agent=7``),
                                           ``limit`` (1-1000, default 100), ``cursor`` (the
                                           last page's ``next``)
=========================================  ====================================================

404 for an id the store does not hold, 400 for a bad query, 401 without a valid token,
403 for a delete with a read-only token, 503 when the store fails (its message) or is off.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..errors import StoreError
from ..files.formats import subtitles, transcript
from ..records.store import KINDS, STATUSES, Query, Store
from ..records.transcript import Transcript

__all__ = ["transcript_routes", "MAX_LIMIT", "FORMATS"]

log = logging.getLogger("streamdec.server")

MAX_LIMIT = 1000
FORMATS = ("json", "text", "srt", "vtt")
_MEDIA = {"text": "text/plain; charset=utf-8", "srt": "application/x-subrip; charset=utf-8",
          "vtt": "text/vtt; charset=utf-8"}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


def _int(query, name: str, default: int, low: int, high: int | None = None) -> int:
    text = query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be in [{low}, {high if high is not None else 'inf'}], "
                         f"got {value}")
    return value


def _float(query, name: str) -> float | None:
    text = query.get(name)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number (epoch seconds), got {text!r}") from None


def render(record: Transcript, fmt: str) -> Response:
    """A transcript in one of ``FORMATS``."""
    if fmt == "json":
        return JSONResponse(record.to_json())
    results = record.results()
    if fmt == "text":
        return Response(transcript(results) + "\n", media_type=_MEDIA["text"])
    return Response(subtitles(results, fmt), media_type=_MEDIA[fmt])


def listing_query(query) -> Query:
    """A listing's ``Query`` from a request's query string (ValueError: what is wrong)."""
    known = {"kind", "status", "since", "until", "limit", "cursor"}
    unknown = sorted(k for k in query.keys() if k not in known and not k.startswith("meta."))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)} (kind, status, since, "
                         "until, meta.KEY, limit, cursor)")
    kind, status = query.get("kind"), query.get("status")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    cursor = query.get("cursor")
    if cursor is not None and "|" not in cursor:
        raise ValueError(f"not a cursor of this listing: {cursor!r}")
    metadata = tuple((k[len("meta."):], query[k]) for k in query.keys()
                     if k.startswith("meta.") and len(k) > len("meta."))
    return Query(kind=kind, status=status, since=_float(query, "since"),
                 until=_float(query, "until"), metadata=metadata,
                 limit=_int(query, "limit", 100, 1, MAX_LIMIT), after=cursor)


def access_refusal(access, request: Request, write: bool, what: str) -> Response | None:
    """401 without a token that may read (or, to ``write``, that may write); 403 for a
    read-only token asking to write ``what``; None when the request may go on."""
    if write:
        if not access.authorized(request.headers, request.query_params):
            if access.may_read(request.headers, request.query_params) and access.tokens:
                return _error(403, f"this token may only read {what}")
            return _error(401, "missing or invalid bearer token")
    elif not access.may_read(request.headers, request.query_params):
        return _error(401, "missing or invalid bearer token (Authorization: Bearer TOKEN)")
    return None


def transcript_routes(context) -> list[Route]:
    """The HTTP routes of stored transcripts over ``context.records``."""

    def refusal(request: Request, write: bool = False) -> Response | None:
        refused = access_refusal(context.access, request, write, "transcripts")
        if refused is not None:
            return refused
        if context.records is None:
            return _error(503, "the transcript store is off ([store] enabled = false)")
        return None

    async def one(request: Request, kind: str) -> Response:
        ref = request.path_params["ref"]
        refused = refusal(request, write=request.method == "DELETE")
        if refused is not None:
            return refused
        records = context.records
        try:
            if request.method == "DELETE":
                return await _delete(records, kind, ref, request)
            fmt = request.query_params.get("format", "json")
            if fmt not in FORMATS:
                raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
            unknown = sorted(set(request.query_params.keys()) - {"format", "from_segment",
                                                                  "token"})
            if unknown:
                raise ValueError(f"unknown parameter(s) {', '.join(unknown)}")
            first = _int(request.query_params, "from_segment", 0, 0)
            sessions = await records.read(Store.sessions, kind, ref)
            if not sessions:
                return _error(404, f"no {kind} {ref!r} in the transcript store")
            ids = [s.record_id for s in sessions]
            finals = await records.read(Store.finals, ids, first)
            keywords = await records.read(Store.keywords, ids) if fmt == "json" else []
        except ValueError as e:
            return _error(400, str(e))
        except StoreError as e:
            return _error(503, str(e))
        return render(Transcript.merge(kind, ref, sessions, finals, keywords), fmt)

    async def call(request: Request) -> Response:
        return await one(request, "call")

    async def stream(request: Request) -> Response:
        return await one(request, "stream")

    async def listing(request: Request) -> Response:
        refused = refusal(request)
        if refused is not None:
            return refused
        params = {k: v for k, v in request.query_params.items() if k != "token"}
        try:
            query = listing_query(params)
            sessions, cursor = await context.records.read(Store.listing, query)
        except ValueError as e:
            return _error(400, str(e))
        except StoreError as e:
            return _error(503, str(e))
        return JSONResponse({"sessions": [s.to_json() for s in sessions], "next": cursor})

    return [Route("/calls/{ref}/transcript", call, methods=["GET", "DELETE"]),
            Route("/streams/{ref}/transcript", stream, methods=["GET", "DELETE"]),
            Route("/transcripts", listing)]


async def _delete(records, kind: str, ref: str, request: Request) -> Response:
    client = request.client
    reason = f"DELETE by {client.host if client else '-'}"
    sessions, finals = await records.read(Store.delete, kind, ref, reason)
    if not sessions:
        return _error(404, f"no {kind} {ref!r} in the transcript store")
    log.warning(json.dumps({"event": "transcript_deleted", "kind": kind, "id": ref,
                            "sessions": sessions, "finals": finals, "reason": reason}))
    body: dict[str, Any] = {"deleted": {"sessions": sessions, "finals": finals}}
    return JSONResponse(body)
