"""``CallRelay``: the links between the call hubs of one server's worker processes.

With ``serve --workers N`` a call (Twilio, audio fork, AudioSocket) and the subscribers of
its ``/calls/{call_id}`` may sit on different workers. Each worker's ``CallHub`` decides
what the others must get (``subscribers``: requests, answers, the calls' messages); this
module carries it: one Unix stream socket per pair of workers, in a folder the supervisor
makes (``ServerShare.calls_dir``), each message one line of JSON.

Worker ``i`` listens on ``worker-i.sock`` and connects to every worker with a lower index
(so each pair has one link, whichever of the two started last), sending its index first
(``{"hello": i}``). A link that closes (the other worker died or stopped) tells the hub
(``unlinked``); the side that connects tries again every ``RETRY_SECONDS`` until the
worker is back, and the hub then asks it again (``linked``). Nothing waits on a link: a
worker that falls ``MAX_BUFFER_BYTES`` behind reading is cut off (its link closes and is
made again), so a stalled worker never holds up another. A line that is not a relay
message closes its link, with a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os

from .subscribers import CallHub

__all__ = ["CallRelay", "socket_path", "RETRY_SECONDS", "MAX_BUFFER_BYTES"]

log = logging.getLogger("streamdec.server")

#: how often a worker tries again to link to a worker that is not listening (yet)
RETRY_SECONDS = 0.2
#: a link whose unsent messages pass this is closed (the other worker is not reading)
MAX_BUFFER_BYTES = 16 << 20
#: the longest line a link reads (a call's backlog in one answer)
MAX_LINE_BYTES = 64 << 20


def socket_path(directory: str, worker: int) -> str:
    return os.path.join(directory, f"worker-{worker}.sock")


class CallRelay:
    """Links ``hub`` (worker ``worker`` of ``workers``) to the other workers' hubs."""

    def __init__(self, hub: CallHub, directory: str, worker: int, workers: int) -> None:
        self.hub, self.directory, self.worker, self.workers = hub, directory, worker, workers
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()
        self._closing = False

    @property
    def peers(self) -> list[int]:
        return list(self._writers)

    @property
    def others(self) -> list[int]:
        return [n for n in range(self.workers) if n != self.worker]

    def state(self) -> dict[str, list[int]]:
        """The other workers linked now, and those not (starting again after a death, or
        cut off for not reading: ``/health`` shows it)."""
        return {"linked": sorted(self._writers),
                "unlinked": [n for n in self.others if n not in self._writers]}

    def send(self, worker: int, message: dict) -> None:
        writer = self._writers.get(worker)
        if writer is None:
            return
        if writer.transport.get_write_buffer_size() > MAX_BUFFER_BYTES:
            log.warning(json.dumps({"event": "call_link_cut", "worker": worker,
                                    "reason": "not reading: over "
                                              f"{MAX_BUFFER_BYTES} bytes unsent"}))
            self._unlink(worker, writer)
            return
        writer.write(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")

    async def start(self) -> None:
        """Listen for the workers above this one; link to those below (in the background:
        a worker that is not up yet is linked when it is)."""
        path = socket_path(self.directory, self.worker)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # left by this worker's previous process
        self._server = await asyncio.start_unix_server(self._accepted, path,
                                                       limit=MAX_LINE_BYTES)
        for other in range(self.worker):
            self._spawn(self._connect(other))

    async def close(self) -> None:
        """Close every link (what was sent is flushed first) and stop listening."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for worker, writer in list(self._writers.items()):
            self._unlink(worker, writer)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, other: int) -> None:
        path = socket_path(self.directory, other)
        while not self._closing:
            try:
                reader, writer = await asyncio.open_unix_connection(path, limit=MAX_LINE_BYTES)
            except OSError:  # not listening (yet, or again)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            writer.write(json.dumps({"hello": self.worker}).encode() + b"\n")
            await self._run(other, reader, writer)
            await asyncio.sleep(RETRY_SECONDS)

    async def _accepted(self, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        try:
            hello = json.loads(await reader.readline())
            other = hello["hello"]
            if not isinstance(other, int) or not self.worker < other < self.workers:
                raise ValueError(f"not a worker above {self.worker}: {other!r}")
        except (ValueError, KeyError, TypeError, OSError) as e:
            log.warning(json.dumps({"event": "call_link_refused", "error": str(e)[:200]}))
            writer.close()
            return
        self._spawn(self._run(other, reader, writer))

    async def _run(self, other: int, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
        """Serve one link until it closes."""
        stale = self._writers.get(other)
        if stale is not None:  # the worker came back before its old link was seen closed
            self._unlink(other, stale)
        self._writers[other] = writer
        log.info(json.dumps({"event": "call_link", "worker": other}))
        self.hub.linked(other)
        try:
            while line := await reader.readline():
                if self._writers.get(other) is not writer:
                    break
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ValueError(f"not a call relay message: {line[:200]!r}")
                self.hub.received(other, message)
        except (ValueError, KeyError, TypeError) as e:
            log.warning(json.dumps({"event": "call_link_error", "worker": other,
                                    "error": str(e)[:200]}))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._unlink(other, writer)

    def _unlink(self, other: int, writer: asyncio.StreamWriter) -> None:
        if self._writers.get(other) is writer:
            del self._writers[other]
            self.hub.unlinked(other)
        writer.close()
