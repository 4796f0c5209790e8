"""An ASGI middleware for Ray Serve's HTTP proxy: WebSocket clients get what the
single-process server gives them when Serve itself answers, or when a replica is lost.

Serve's proxy hosts the ASGI app of each replica behind one port. For WebSockets it falls
short in two places, which this middleware mends (HTTP requests pass untouched):

- **Refusals.** When every replica is at its stream limit and the proxy's queue is full
  (or the application is unavailable), Serve answers with a plain HTTP response, which an
  ASGI server cannot send on a WebSocket handshake (the client would see a bare 500). It is
  sent as the WebSocket denial response instead: the same status (503), Serve's reason as
  the body and in a ``Hint`` header, as the single-process server refuses.
- **A lost replica.** When the replica serving a stream dies (its process killed, its node
  gone) or is stopped with the stream still open, the replica's side ends without a close
  frame and the client would see the connection drop (1006). The client gets instead
  ``{"error": ..., "kind": "replica_lost"}`` and close code 1012 (service restart) with a
  reason: it may reconnect at once (Serve routes the new connection to a live replica).
  A handshake that the lost replica had not answered is refused with 503 and a reason.

Serve installs it in every proxy from ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=
streamdec.rayserve.proxy:middlewares`` in the environment of the Ray node (``streamdec
serve --ray`` sets it for the Ray instance it starts; a cluster's nodes need it when they
start: see docs/scale-out.md).
"""

from __future__ import annotations

from ..server.connection import ClientError, error_json

__all__ = ["WebSocketGuard", "middlewares", "CALLBACK_ENV", "CALLBACK"]

CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "streamdec.rayserve.proxy:middlewares"

LOST = "the replica serving this stream stopped; reconnect"
UNANSWERED = "the replica chosen for this connection stopped before answering; retry"


class WebSocketGuard:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        state = {"accepted": False, "answered": False, "closed": False, "gone": False}
        refusal: dict | None = None  # Serve's http.response.start, until its body comes

        async def watched_receive():
            message = await receive()
            if message["type"] == "websocket.disconnect":
                state["gone"] = True
            return message

        async def guarded_send(message) -> None:
            nonlocal refusal
            kind = message["type"]
            if kind == "http.response.start":  # Serve refusing: kept for its body
                refusal = message
                return
            if kind == "http.response.body" and refusal is not None:
                if message.get("more_body"):
                    return  # Serve's reasons are one message; a longer body is cut there
                body = bytes(message.get("body", b""))
                reason = body.decode("utf-8", "replace").strip()[:300]
                await _deny(send, refusal["status"], reason,
                            [(k, v) for k, v in refusal.get("headers", [])
                             if k.lower() not in (b"content-length", b"content-type")])
                state["answered"] = True
                return
            if kind == "websocket.accept":
                state["accepted"] = True
            elif kind in ("websocket.close", "websocket.http.response.start"):
                state["closed"] = kind == "websocket.close"
                state["answered"] = True
            await send(message)

        try:
            await self.app(scope, watched_receive, guarded_send)
        finally:
            await self._finish(send, state)

    @staticmethod
    async def _finish(send, state: dict) -> None:
        try:
            if state["accepted"] and not state["closed"] and not state["gone"]:
                await send({"type": "websocket.send",
                            "text": error_json(ClientError("replica_lost", LOST))})
                await send({"type": "websocket.close", "code": 1012, "reason": LOST})
            elif not state["accepted"] and not state["answered"]:
                await _deny(send, 503, UNANSWERED, [])
        except Exception:  # the client is gone too
            pass


async def _deny(send, status: int, reason: str, headers: list) -> None:
    body = reason.encode()
    await send({"type": "websocket.http.response.start", "status": status,
                "headers": [*headers, (b"hint", reason.encode("latin-1", "replace")),
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "websocket.http.response.body", "body": body})


def middlewares() -> list:
    """What Serve's proxy calls (``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``)."""
    from starlette.middleware import Middleware

    return [Middleware(WebSocketGuard)]
