"""``HeadDeadline``: uvicorn's HTTP protocol with a deadline for each request's head.

uvicorn closes a keep-alive connection that sends nothing for ``timeout_keep_alive``
seconds, but a connection whose request head (the request line and headers: a WebSocket
handshake too) arrives a byte at a time is never closed: every byte restarts nothing, and
before the first request no timer runs at all (slowloris). Such connections hold a socket
each and are not counted by ``max_connections`` (a connection is admitted once its
handshake is read).

``HeadDeadline`` gives each head ``head_timeout`` seconds (the server's
``idle_timeout_seconds``): from the connection's start, then from the end of each
response. A head not whole by then is answered ``408 Request Timeout`` and the connection
closed. It works for whichever parser uvicorn picks (httptools or h11): a head is whole
when the protocol has started a request cycle for it; a connection upgraded to a
WebSocket has left this protocol.
"""

from __future__ import annotations

import json
import logging

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["HeadDeadline", "HEAD_TIMEOUT_RESPONSE"]

log = logging.getLogger("streamdec.server")

HEAD_TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; "
                         b"charset=utf-8\r\nconnection: close\r\ncontent-length: 34\r\n\r\n"
                         b"request head not received in time\n")


class HeadDeadline(AutoHTTPProtocol):
    """uvicorn's HTTP protocol (httptools where installed, else h11) with a deadline for
    each request head (module notes)."""

    def __init__(self, *args, head_timeout: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self._head_timer = None
        self._head_cycle = None  # the request cycle when the timer was armed

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, *args) -> None:  # (h11's takes its event)
        self._cancel_head_timer()
        super().handle_websocket_upgrade(*args)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        if not self.transport.is_closing():
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        transport = self.transport
        if (transport.is_closing() or transport.get_protocol() is not self  # a WebSocket now
                or self.cycle is not self._head_cycle):  # a request came: its head is whole
            return
        client = self.client
        log.warning(json.dumps({"event": "head_timeout", "peer": "%s:%d" % client if client
                                else "-", "seconds": self.head_timeout}))
        transport.write(HEAD_TIMEOUT_RESPONSE)
        transport.close()
