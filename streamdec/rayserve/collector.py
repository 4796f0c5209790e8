"""``Collector``: what every replica reports, merged into one ``/metrics`` and one
``/health`` for the whole application. Plain Python (no Ray): ``run`` hosts it as a named
Ray actor, the replicas report to it, the status endpoints read it.

Each replica reports, every ``REPORT_SECONDS``, its Prometheus metric families (its own
registry's ``collect()``: the same metrics as the single-process server) and its health
(active streams, connections, pid, node). ``/metrics`` is every fresh report's families
with a ``replica`` label added to each sample, one family per name, plus
``streamdec_replicas`` (replicas reporting). A replica that stops reporting (it died, or it
was stopped) is left out after ``STALE_SECONDS``. The reply to a report tells the replica
whether to drain (the server is shutting down).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric

from .. import __version__

__all__ = ["Collector", "ReplicaHealth", "REPORT_SECONDS", "STALE_SECONDS"]

REPORT_SECONDS = 1.0
STALE_SECONDS = 3 * REPORT_SECONDS


@dataclass(frozen=True)
class ReplicaHealth:
    active_streams: int
    connections: int
    pid: int
    node: str
    draining: bool


@dataclass
class _Report:
    families: list[Metric]
    health: ReplicaHealth
    at: float


def with_label(family: Metric, name: str, value: str) -> Metric:
    """A copy of ``family`` with ``name="value"`` added to every sample's labels."""
    out = Metric(family.name, family.documentation, family.type, family.unit)
    for s in family.samples:
        out.add_sample(s.name, {**s.labels, name: value}, s.value, s.timestamp, s.exemplar)
    return out


class _Families:
    """What ``generate_latest`` renders: anything with ``collect()``."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


class Collector:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._reports: dict[str, _Report] = {}
        self.draining = False

    def report(self, replica: str, families: list[Metric], health: ReplicaHealth) -> dict:
        """One replica's metrics and health; the reply says whether it should drain."""
        self._reports[replica] = _Report(families, health, self._clock())
        return {"drain": self.draining}

    def forget(self, replica: str) -> None:
        """A replica stopped cleanly: leave it out at once."""
        self._reports.pop(replica, None)

    def drain(self) -> None:
        """The server is shutting down: every replica's next report is told to drain."""
        self.draining = True

    def _fresh(self) -> dict[str, _Report]:
        now = self._clock()
        for replica in [r for r, rep in self._reports.items() if now - rep.at > STALE_SECONDS]:
            del self._reports[replica]
        return dict(sorted(self._reports.items()))

    def health(self) -> dict:
        """The application's health: the package's version, totals and each replica's
        own."""
        fresh = self._fresh()
        replicas = {r: {"active_streams": rep.health.active_streams,
                        "connections": rep.health.connections, "pid": rep.health.pid,
                        "node": rep.health.node, "draining": rep.health.draining}
                    for r, rep in fresh.items()}
        return {"status": "draining" if self.draining else "ok" if fresh else "starting",
                "version": __version__, "replicas": len(fresh),
                "active_streams": sum(r["active_streams"] for r in replicas.values()),
                "connections": sum(r["connections"] for r in replicas.values()),
                "replica_health": replicas}

    def metrics(self) -> bytes:
        """Prometheus text: every fresh replica's families, labelled ``replica``."""
        fresh = self._fresh()
        merged: dict[str, Metric] = {}
        for replica, rep in fresh.items():
            for family in rep.families:
                labelled = with_label(family, "replica", replica)
                if family.name in merged:
                    merged[family.name].samples.extend(labelled.samples)
                else:
                    merged[family.name] = labelled
        count = Metric("streamdec_replicas", "Replicas reporting", "gauge")
        count.add_sample("streamdec_replicas", {}, len(fresh))
        return generate_latest(_Families([count, *merged.values()]))
