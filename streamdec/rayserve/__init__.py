"""``streamdec serve --ray``: the daemon as a Ray Serve application, one more thin adapter
over the same engine and the same ASGI app (``streamdec.server``), on one machine or a Ray
cluster.

==================  ==============================================================
module              what
==================  ==============================================================
``config``          ``RayConfig``: the ``[ray]`` table (replicas, streams per replica)
``collector``       ``Collector``: every replica's metrics and health, merged
``proxy``           a middleware for Serve's proxy: WebSocket refusals, lost replicas
``replica``         the Serve deployments: ``StreamdecReplica``, ``StatusEndpoint``
``run``             ``serve_on_ray``: start or join Ray, deploy, drain, stop
==================  ==============================================================

Importing this package, ``config``, ``collector`` or ``proxy`` needs no Ray; ``replica``
and running need the ``ray`` extra (``ray[serve]``).
"""

from .config import RayConfig

__all__ = ["RayConfig"]
