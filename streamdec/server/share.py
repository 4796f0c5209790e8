"""``ServerShare``: what the worker processes of one server (``workers.py``) count
together, in shared memory: the connections every worker admitted (the server-wide
``max_connections``), the open connections and engine streams per worker (``/health``,
``/metrics``), and which workers listen; and ``calls_dir``, where the workers' call hubs
link up (``call_relay``). The supervisor makes it; each worker sets its ``worker`` index
and passes it to its ``ServerContext``.
"""

from __future__ import annotations

__all__ = ["ServerShare"]


class ServerShare:
    """Counts the workers of one server share (in shared memory; see the module notes).
    ``worker``: the index of the process using it (set in each worker)."""

    def __init__(self, mp_context, workers: int, calls_dir: str | None = None) -> None:
        self.workers = workers
        self.worker = -1
        self.calls_dir = calls_dir  # the call hubs' sockets (call_relay); None: not linked
        self._connections = mp_context.Value("i", 0)
        self._open = mp_context.Array("i", workers)  # connections per worker
        self._streams = mp_context.Array("i", workers)  # engine streams per worker
        self._ready = mp_context.Array("b", workers)  # listening at least once

    def admit(self) -> None:
        """One more connection open (``Access`` checked the cap against ``connections``)."""
        with self._connections.get_lock():
            self._connections.value += 1
            self._open[self.worker] += 1

    def release(self) -> None:
        with self._connections.get_lock():
            self._connections.value -= 1
            self._open[self.worker] -= 1

    @property
    def connections(self) -> int:
        return self._connections.value

    def set_streams(self, count: int) -> None:
        self._streams[self.worker] = count

    @property
    def active_streams(self) -> int:
        return sum(self._streams[:])

    def set_ready(self) -> None:
        self._ready[self.worker] = 1

    def ready(self, worker: int) -> bool:
        return bool(self._ready[worker])

    def forget(self, worker: int) -> None:
        """A worker died: its connections and streams are gone."""
        with self._connections.get_lock():
            self._connections.value -= self._open[worker]
            self._open[worker] = 0
        self._streams[worker] = 0
