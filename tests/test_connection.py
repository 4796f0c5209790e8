"""``Connection.receive`` reads the socket in the session's own task: an interruption (the
drain, the idle timer) cancels a read that waits and loses no message; a cancellation
from elsewhere still cancels the task.

The socket is the one boundary faked here: a WebSocket whose ``receive`` waits on an
``asyncio.Queue``, as uvicorn's does (the real server path is in test_server*.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from streamdec import Recognizer
from streamdec.engine import Engine
from streamdec.errors import ClientError, Disconnected
from streamdec.server.config import ServerConfig
from streamdec.server.connection import DRAIN, Connection
from streamdec.server.options import StreamOptions


class QueueSocket:
    """The part of Starlette's WebSocket that ``Connection`` reads: ``receive`` waits for
    the next ASGI message of a queue (a cancelled wait leaves the message queued)."""

    client = SimpleNamespace(host="127.0.0.1", port=1)
    scope: dict = {}  # no WebSocket layer that hands audio over as it arrives

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict] = asyncio.Queue()

    async def receive(self) -> dict:
        return await self.queue.get()

    def put(self, data: bytes) -> None:
        self.queue.put_nowait({"type": "websocket.receive", "bytes": data})


@pytest.fixture(scope="module")
def recognizer():
    return Recognizer()


def with_connection(recognizer, body, idle: float = 30.0) -> None:
    """Run ``await body(connection, socket)`` on a started connection of a real engine."""
    async def main():
        async with Engine(recognizer) as engine:
            socket = QueueSocket()
            metrics = SimpleNamespace()  # receive touches no metric
            conn = Connection(engine, ServerConfig(idle_timeout_seconds=idle), metrics,
                              socket, "sherpa", StreamOptions(16000, "f32le"))
            conn.start()
            try:
                await body(conn, socket)
            finally:
                conn.release()

    asyncio.run(main())


async def waiting_read(conn: Connection) -> asyncio.Future:
    """A ``receive`` in a task of its own, once it waits on the socket."""
    reading = asyncio.ensure_future(conn.receive())
    await asyncio.sleep(0.01)
    return reading


def test_a_drain_interrupts_a_waiting_read_and_loses_no_message(recognizer):
    async def body(conn, socket):
        reading = await waiting_read(conn)
        conn.request_drain()
        assert await reading is DRAIN
        socket.put(b"\0" * 8)
        assert await conn.receive() == b"\0" * 8
        # a message that arrived in the same turn as the drain stays queued for after it
        reading = await waiting_read(conn)
        socket.put(b"\1" * 8)  # the wait is resolved, its task not yet resumed
        conn.request_drain()
        assert await reading is DRAIN
        assert await conn.receive() == b"\1" * 8
        # the drain when no read waits: the next receive returns it, then the messages
        socket.put(b"\2" * 8)
        conn.request_drain()
        assert await conn.receive() is DRAIN
        assert await conn.receive() == b"\2" * 8

    with_connection(recognizer, body)


def test_a_cancel_from_elsewhere_still_cancels_the_reading_task(recognizer):
    async def body(conn, socket):
        reading = await waiting_read(conn)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        # both at once: the drain's cancel and another one; the task still ends
        reading = await waiting_read(conn)
        conn.request_drain()
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert await conn.receive() is DRAIN  # the drain is still to be seen
        socket.put(b"\3" * 8)
        assert await conn.receive() == b"\3" * 8

    with_connection(recognizer, body)


def test_idle_counts_only_while_the_session_waits_for_a_message(recognizer):
    async def body(conn, socket):
        socket.put(b"\0" * 8)
        assert await conn.receive() == b"\0" * 8
        await asyncio.sleep(0.35)  # the session is busy (a long feed): not idle
        socket.put(b"\1" * 8)
        assert await conn.receive() == b"\1" * 8
        started = asyncio.get_running_loop().time()
        with pytest.raises(ClientError) as e:
            await conn.receive()
        assert e.value.kind == "idle_timeout"
        assert 0.15 <= asyncio.get_running_loop().time() - started < 1.0
        socket.queue.put_nowait({"type": "websocket.disconnect", "code": 1001})
        with pytest.raises(Disconnected):
            await conn.receive()
        with pytest.raises(Disconnected):  # and again: the socket is not read again
            await conn.receive()
        assert conn.close_code == 1001

    with_connection(recognizer, body, idle=0.2)
