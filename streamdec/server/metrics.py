"""Prometheus metrics of one server (its own registry: no global state), served at
``/metrics``. ``Metrics`` is also the engine's observer (batch sizes, latency, errors).

With ``multiprocess`` (a worker of ``server.workers``) the values go to prometheus-client's
files in ``PROMETHEUS_MULTIPROC_DIR`` and ``render`` reads every worker's: counters and
histograms summed over the workers (those of a dead worker stay counted), the open
connections and active streams summed over the live workers, the real-time factor one
series per live worker (label ``pid``).

=======================================  =========  ==========================================
name                                     type       what
=======================================  =========  ==========================================
streamdec_connections_total{protocol}    counter    connections admitted (sherpa, vosk, http,
                                                    twilio, audiofork, audiosocket, calls,
                                                    deepgram, realtime)
streamdec_connections_open{protocol}     gauge      connections open now
streamdec_active_streams                 gauge      engine streams open now
streamdec_audio_seconds_total            counter    audio received, seconds (per channel)
streamdec_decode_batch_size              histogram  streams per decoded batch
streamdec_decode_seconds_total           counter    time spent computing batches
streamdec_decoded_audio_seconds_total    counter    audio those batches covered
streamdec_real_time_factor               gauge      decode seconds / decoded audio seconds
streamdec_result_latency_seconds         histogram  a chunk's last sample in -> its results
streamdec_errors_total{kind}             counter    client errors and failures by kind
streamdec_read_pauses_total              counter    times a stream's reads paused (its
                                                    ``max_pending_seconds`` undecoded)
streamdec_read_paused_seconds_total      counter    time reads stayed paused
streamdec_loop_lag_seconds               histogram  how late the event loop ran a timer
streamdec_ready_streams                  gauge      streams waiting for a decode (sampled)
streamdec_batches_in_flight              gauge      batches being decoded (sampled)
streamdec_decode_delay_seconds           gauge      how long the longest-waiting ready stream
                                                    has waited for its decode (sampled; the
                                                    most of the live workers): past
                                                    ``max_decode_delay_ms`` new connections
                                                    are refused
streamdec_webhook_messages_total         counter    webhook messages by ``outcome``: delivered,
                                                    retried, failed, dropped; with the store
                                                    on (the outbox): delivered, retried, dead
streamdec_outbox_rows                    gauge      the store's outbox rows by ``status``:
                                                    pending, delivered, dead (sampled)
streamdec_subscriber_drops_total         counter    call subscribers dropped for falling behind
=======================================  =========  ==========================================
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram,
                               generate_latest)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["Metrics", "CONTENT_TYPE_LATEST"]

_LATENCY_BUCKETS = (0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75,
                    1.0, 2.0, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


class Metrics:
    def __init__(self, chunk_seconds: float, active_streams: Callable[[], int],
                 multiprocess: bool = False) -> None:
        self.chunk_seconds = chunk_seconds  # audio one decoded chunk advances a stream by
        self.registry = CollectorRegistry()
        self._active_streams = active_streams
        self._multiprocess = multiprocess
        # multiprocess: the values live in files that render() collects (no registry here)
        r = None if multiprocess else self.registry
        if multiprocess:
            from prometheus_client import multiprocess as mp

            mp.MultiProcessCollector(self.registry)
        self.connections = Counter("streamdec_connections", "Connections admitted",
                                   ["protocol"], registry=r)
        self.open = Gauge("streamdec_connections_open", "Connections open now", ["protocol"],
                          registry=r, multiprocess_mode="livesum")
        self.streams = Gauge("streamdec_active_streams", "Engine streams open now",
                             registry=r, multiprocess_mode="livesum")
        if not multiprocess:  # (functions are not collected across processes)
            self.streams.set_function(active_streams)
        self.audio = Counter("streamdec_audio_seconds", "Audio received (seconds, per channel)",
                             registry=r)
        self.batch = Histogram("streamdec_decode_batch_size", "Streams per decoded batch",
                               buckets=_BATCH_BUCKETS, registry=r)
        self.decode = Counter("streamdec_decode_seconds", "Time spent computing batches",
                              registry=r)
        self.decoded = Counter("streamdec_decoded_audio_seconds",
                               "Audio covered by the decoded batches", registry=r)
        self.rtf = Gauge("streamdec_real_time_factor",
                         "Decode seconds per decoded audio second", registry=r,
                         multiprocess_mode="liveall")
        if not multiprocess:
            self.rtf.set_function(self._rtf)
        self.latency = Histogram("streamdec_result_latency_seconds",
                                 "From a chunk's last sample accepted to its results",
                                 buckets=_LATENCY_BUCKETS, registry=r)
        self.errors = Counter("streamdec_errors", "Errors by kind", ["kind"], registry=r)
        # stall diagnostics: paused reads, the loop's lag, the engine's queue
        self.pauses = Counter("streamdec_read_pauses",
                              "Times a stream's reads paused (too much audio undecoded)",
                              registry=r)
        self.paused = Counter("streamdec_read_paused_seconds", "Time reads stayed paused",
                              registry=r)
        self.loop_lag = Histogram("streamdec_loop_lag_seconds",
                                  "How late the event loop ran a timer",
                                  buckets=_LAG_BUCKETS, registry=r)
        self.ready = Gauge("streamdec_ready_streams",
                           "Streams waiting for a decode (sampled)", registry=r,
                           multiprocess_mode="livesum")
        self.in_flight = Gauge("streamdec_batches_in_flight",
                               "Batches being decoded (sampled)", registry=r,
                               multiprocess_mode="livesum")
        self.decode_delay = Gauge("streamdec_decode_delay_seconds",
                                  "How long the longest-waiting ready stream has waited for "
                                  "its decode (sampled; past server.max_decode_delay_ms new "
                                  "connections are refused)", registry=r,
                                  multiprocess_mode="livemax")
        self.webhook = Counter("streamdec_webhook_messages", "Webhook messages by outcome",
                               ["outcome"], registry=r)
        # every worker reads the same store: the most of the live workers' samples
        self.outbox = Gauge("streamdec_outbox_rows", "The store's outbox rows by status "
                            "(sampled)", ["status"], registry=r, multiprocess_mode="livemax")
        self.subscriber_drops = Counter("streamdec_subscriber_drops",
                                        "Call subscribers dropped for falling behind",
                                        registry=r)
        self.second_pass = Counter("streamdec_second_pass",
                                   "Finals by second-pass outcome (done; rejected: its output "
                                   "failed a check; skipped: past its deadline or the queue "
                                   "full)", ["outcome"], registry=r)
        self.second_pass_latency = Histogram("streamdec_second_pass_latency_seconds",
                                             "From a first-pass final to its second-pass "
                                             "final going out", buckets=_LATENCY_BUCKETS,
                                             registry=r)
        self.partial_refresh = Counter("streamdec_partial_refresh",
                                       "Partial refreshes by local agreement, by outcome "
                                       "(done; skipped: the stream's last still running or "
                                       "the second pass's threads busy; dropped: its "
                                       "utterance ended first)", ["outcome"],
                                       registry=r)
        self._decode_seconds = self._decoded_seconds = 0.0

    def _rtf(self) -> float:
        return self._decode_seconds / self._decoded_seconds if self._decoded_seconds else 0.0

    def render(self) -> bytes:
        self.refresh()
        return generate_latest(self.registry)

    def refresh(self) -> None:
        """Write the gauges computed from the engine (multiprocess: the files hold values,
        not functions; called at each batch, connection change and render)."""
        if self._multiprocess:
            self.streams.set(self._active_streams())
            self.rtf.set(self._rtf())

    # -- EngineObserver --------------------------------------------------------------------
    def on_batch(self, size: int, seconds: float) -> None:
        self.batch.observe(size)
        self.decode.inc(seconds)
        self.decoded.inc(size * self.chunk_seconds)
        self._decode_seconds += seconds
        self._decoded_seconds += size * self.chunk_seconds
        self.refresh()

    def on_result_latency(self, seconds: float) -> None:
        self.latency.observe(seconds)

    def on_second_pass(self, status: str, seconds: float) -> None:
        self.second_pass.labels(status).inc()
        self.second_pass_latency.observe(seconds)

    def on_partial_refresh(self, outcome: str) -> None:
        self.partial_refresh.labels(outcome).inc()

    def on_stream_error(self, error) -> None:
        """A stream's decode failed (counted here, once, not by its connection)."""
        self.errors.labels("decode_failed").inc()
