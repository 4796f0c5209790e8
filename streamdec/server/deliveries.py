"""The webhook's outbox over HTTP (``streamdec.records.delivery``), behind the server's
tokens: a token of ``token_file`` or of ``read_token_file`` may list; only a token of
``token_file`` may replay (no token configured: anyone may).

=====================================  ========================================================
route                                  what
=====================================  ========================================================
GET ``/deliveries``                    outbox rows in order: ``status`` (pending, delivered,
                                       dead), ``limit`` (1-1000, default 100), ``after`` (the
                                       last page's ``next``); each row: id, key, call_id,
                                       status, attempts, next_at, since, created_at,
                                       delivered_at, last_error, body
POST ``/deliveries/{id}/replay``       a dead row back to pending, due now, with a new
                                       retention: ``{"replayed": id}``
=====================================  ========================================================

400 for a bad query, 401 without a valid token, 403 for a replay with a read-only token,
404 for a replay of an id that is not a dead row, 503 when the store fails or the outbox
is off (the store off, or no webhook).
"""

from __future__ import annotations

import json
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import StoreError
from ..records.store import DELIVERY_STATUSES, Store
from .transcripts import MAX_LIMIT, _error, _int, access_refusal

__all__ = ["delivery_routes"]

log = logging.getLogger("streamdec.server")


def delivery_routes(context) -> list[Route]:
    """The HTTP routes of the outbox over ``context.records``."""

    def refusal(request: Request, write: bool = False) -> Response | None:
        refused = access_refusal(context.access, request, write, "deliveries")
        if refused is not None:
            return refused
        if context.records is None or context.deliverer is None:
            return _error(503, "the outbox is off: it needs the transcript store "
                               "([store] enabled) and a webhook (server.webhook_url)")
        return None

    async def listing(request: Request) -> Response:
        refused = refusal(request)
        if refused is not None:
            return refused
        query = request.query_params
        try:
            unknown = sorted(set(query.keys()) - {"status", "limit", "after", "token"})
            if unknown:
                raise ValueError(f"unknown parameter(s) {', '.join(unknown)}")
            status = query.get("status")
            if status is not None and status not in DELIVERY_STATUSES:
                raise ValueError(f"status must be one of {', '.join(DELIVERY_STATUSES)}, "
                                 f"got {status!r}")
            limit = _int(query, "limit", 100, 1, MAX_LIMIT)
            after = _int(query, "after", 0, 0)
            rows = await context.records.read(Store.deliveries, status, limit + 1, after)
        except ValueError as e:
            return _error(400, str(e))
        except StoreError as e:
            return _error(503, str(e))
        page = rows[:limit]
        return JSONResponse({"deliveries": [r.to_json() for r in page],
                             "next": page[-1].seq if len(rows) > limit else None})

    async def replay(request: Request) -> Response:
        refused = refusal(request, write=True)
        if refused is not None:
            return refused
        delivery_id = request.path_params["id"]
        try:
            done = await context.records.read(Store.replay, delivery_id)
        except StoreError as e:
            return _error(503, str(e))
        if not done:
            return _error(404, f"no dead delivery {delivery_id!r} in the outbox")
        log.warning(json.dumps({"event": "delivery_replayed", "id": delivery_id}))
        context.deliverer.wake()
        return JSONResponse({"replayed": delivery_id})

    return [Route("/deliveries", listing),
            Route("/deliveries/{id}/replay", replay, methods=["POST"])]
