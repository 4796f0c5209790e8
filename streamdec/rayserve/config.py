"""``RayConfig``: the ``[ray]`` table of a config file (``streamdec serve --ray``), validated
once. Importing it needs no Ray.

Streams per replica drive everything: a replica never holds more than ``max_streams``
connections (Ray Serve's ``max_ongoing_requests``: its router gives a full replica nothing
more), and between ``min_replicas`` and ``max_replicas`` Serve's autoscaler keeps the
average near ``target_streams`` (its ``target_ongoing_requests``). A WebSocket connection is
one ongoing request for its whole life, so these count live streams (and transcription
requests, as the single-process cap does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError
from ..validation import require_at_least, require_finite, require_positive

__all__ = ["RayConfig"]


@dataclass(frozen=True)
class RayConfig:
    # the Ray cluster: None starts a Ray instance of this machine only (every Ray server on
    # loopback; it stops with the command); "auto" or "HOST:PORT" joins a running cluster
    address: str | None = None
    # replicas: a fixed count when min_replicas == max_replicas, else autoscaling between them
    min_replicas: int = 1
    max_replicas: int = 1
    # streams per replica: autoscaling aims at target_streams; max_streams is a hard limit
    # (a full replica is never given more; new streams then wait at the proxy, at most
    # max_queued of them per proxy, and the rest are refused with HTTP 503)
    target_streams: int = 24
    max_streams: int = 48
    max_queued: int = 32
    # autoscaling: streams averaged over look_back_seconds; a change of the replica count
    # must be wanted this long before it is made
    look_back_seconds: float = 10.0
    upscale_delay_seconds: float = 5.0
    downscale_delay_seconds: float = 60.0
    # scale-down: a replica taken out of service gets no new stream and stops once its
    # streams have ended, or after this long (its remaining clients are then closed with
    # 1012 and a reason, and reconnect)
    scale_down_drain_seconds: float = 600.0
    # CPUs each replica reserves on its Ray node (its engine decodes on the [server] table's
    # ``workers`` threads: unset, 3 or 2 by the model, ``streamdec.engine.sizes_for``)
    replica_cpus: float = 1.0

    def __post_init__(self) -> None:
        require_finite(self, "ray")
        if self.address is not None and not self.address.strip():
            raise ConfigError("ray.address must name a cluster (\"auto\" or HOST:PORT); "
                              "leave it out to start a local Ray instance")
        require_at_least(self, "ray", ("min_replicas", "target_streams", "max_streams",
                                       "max_queued"), 1)
        if self.max_replicas < self.min_replicas:
            raise ConfigError(f"ray.max_replicas ({self.max_replicas}) must be >= "
                              f"ray.min_replicas ({self.min_replicas})")
        if self.max_streams < self.target_streams:
            raise ConfigError(f"ray.max_streams ({self.max_streams}) must be >= "
                              f"ray.target_streams ({self.target_streams})")
        require_positive(self, "ray", ("look_back_seconds",))
        require_at_least(self, "ray", ("upscale_delay_seconds", "downscale_delay_seconds",
                                       "scale_down_drain_seconds", "replica_cpus"), 0)

    @property
    def autoscaling(self) -> bool:
        return self.max_replicas > self.min_replicas

    def with_replicas(self, count: int) -> "RayConfig":
        """A fixed number of replicas (``--replicas N``)."""
        return replace(self, min_replicas=count, max_replicas=count)
