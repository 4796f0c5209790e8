"""One WebSocket client of either protocol: its inbox, its audio, its errors and its end.

A ``Connection`` owns one engine stream per audio channel and is the only I/O of a client:
``serve(session)`` runs a protocol session (``sherpa.SherpaSession``,
``vosk.VoskSession``: state machines without I/O, see ``session``), handing it the
client's messages and the streams' results and carrying out the commands it answers with.
The connection does what every protocol shares:

- **messages in**: ``receive`` reads the socket itself, in the task that serves the
  session (no second task and no hand-over per message); the server draining or the idle
  timer interrupts a read that waits (they cancel it, which loses no message: the message
  queue of the WebSocket layer keeps it); the socket is read no faster than the session
  takes messages (while ``feed`` waits on the engine, reads pause: back-pressure);
- **audio as it arrives**: on uvicorn with ``wsframes.FastBinaryProtocol``, a whole binary
  frame that arrives while a push session (sherpa-onnx) waits for a message, and is audio
  to it (``binary_is_audio``), is fed by the WebSocket layer at once instead of waking the
  session's task (``_take_audio``: the same checks, counters and back-pressure; anything
  it declines takes the queue as before);
- **audio**: size limit, PCM decoding (``decode_pcm``), channel split, stream duration;
- **errors**: a ``ClientError`` names its kind; the client gets ``{"error", "kind"}`` and
  the kind's close code (table below), and nothing else is disturbed;
- **end**: the streams are closed (an abrupt disconnect drops them) and one structured
  log line is written.

=================  ==========  ===============================================================
kind               close code  when
=================  ==========  ===============================================================
``bad_audio``      1007        a binary message that is not whole samples, NaN/inf samples
``bad_json``       1007        a text message that is not JSON where JSON is expected
``bad_message``    1003        text where audio is expected, an unknown command
``bad_config``     1008        an invalid (Vosk) config message
``unsupported``    1003        a valid request this server does not support (yet)
``too_big``        1009        a message over ``max_message_bytes``
``too_long``       1008        audio past ``max_stream_seconds`` (after the results so far)
``idle_timeout``   1008        no message for ``idle_timeout_seconds`` (after the results)
``decode_failed``  1011        decoding this client's stream failed
``replica_lost``   1012        (Ray Serve) the replica serving the stream stopped: reconnect
=================  ==========  ===============================================================
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import TYPE_CHECKING

from ..audio.pcm import decode_pcm, deinterleave
from ..core.results import KeywordEvent
from ..errors import (CLOSE_CODES, AudioInputError, ClientError, DecodeError, Disconnected,
                      StreamdecError)
from .display import formatted
from .options import StreamOptions
from .recording import begin_session, end_status, store_final
from .redaction import NONE, redacted
from .session import DRAIN, Close, Feed, Finish, ForceFinal, Reopen, Reply, Retune, Send
from .wsframes import DIRECT_AUDIO

#: a pause of a connection's reads this long (back-pressure) gets a log line of its own
PAUSE_LOG_SECONDS = 0.5
#: the longest a close waits for the transcript store to commit the session's end
END_WAIT = 2.0

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

    from ..engine import Engine
    from .config import ServerConfig
    from .metrics import Metrics

__all__ = ["Connection", "ClientError", "Disconnected", "DRAIN", "CLOSE_CODES", "error_json"]

log = logging.getLogger("streamdec.server")

_ids = itertools.count(1)


def error_json(error: ClientError) -> str:
    return json.dumps({"error": str(error), "kind": error.kind}, ensure_ascii=False)


class Connection:
    """One client: ``lives`` (one engine stream per channel), inbox, limits and log line.
    It needs the engine (its streams), the limits (``max_message_bytes``,
    ``max_stream_seconds``, ``idle_timeout_seconds`` and the default ``text_format`` of
    the server's config, and the engine's ``max_pending_seconds`` its pause log line
    names) and the metrics (audio seconds, errors, read pauses), nothing else of the
    server."""

    def __init__(self, engine: "Engine", limits: "ServerConfig", metrics: "Metrics",
                 websocket: "WebSocket", protocol: str, options: StreamOptions,
                 records=None, redaction=None) -> None:
        """``records``: the transcript store (``Recorder``; None: finals are not stored);
        ``redaction``: the server's ``RedactionRules`` (None: none), this connection's
        ``redact`` option on top."""
        self.engine = engine
        self.limits = limits
        self.metrics = metrics
        self.websocket = websocket
        self.protocol = protocol
        self.options = options
        self.id = next(_ids)
        client = websocket.client
        self.peer = f"{client.host}:{client.port}" if client else "-"
        self.started = time.monotonic()
        self.audio_seconds = 0.0  # per channel
        self.pauses = 0  # times its reads paused (too much audio undecoded), and how long
        self.paused_seconds = 0.0
        self.close_code: int | None = None
        self.close_reason = ""
        self._end_recorded = False  # the store has the session's end (``_record_end``)
        self.lives = []
        self._started = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self.open_streams(options)
        self.records = records
        self.redaction = redaction or NONE
        self.failed = False  # it ended with an error (``fail``)
        self.record_id = None if records is None else begin_session(
            records, engine, "stream", None, protocol,
            {"peer": self.peer, "options": options.describe()})
        self._reader: asyncio.Task | None = None  # the task waiting on the socket now
        self._interrupting = False  # its wait is being cancelled by an interruption
        self._disconnect: dict | None = None  # the client's close, once read
        self._interrupt: str | None = None  # "drain" or "idle"
        self._last_message = time.monotonic()  # or when the wait for the next one began
        # the WebSocket layer that hands binary messages over as they arrive
        # (``wsframes.FastBinaryProtocol``; None: another server), and the task that holds
        # its reads while the engine catches up
        self._reads = (websocket.scope.get("extensions") or {}).get(DIRECT_AUDIO)
        self._holding: asyncio.Future | None = None
        self.direct_messages = 0  # audio messages taken as they arrived

    # -- streams ---------------------------------------------------------------------------
    def open_streams(self, options: StreamOptions) -> None:
        """Open one engine stream per channel (closing any open ones): ConfigError or
        TokenizeError for unusable search options or hotwords."""
        for live in self.lives:
            live.close()
        engine = self.engine
        self.lives = []
        for _ in range(options.channels):
            self.lives.append(engine.open(search=options.search, hotwords=options.hotwords,
                                          phrases=options.phrases, vad=options.vad,
                                          endpoint=options.endpoint,
                                          second_pass=options.second_pass,
                                          local_agreement=options.local_agreement,
                                          keywords=options.keywords))
        self.options = options
        if self._started and self._idle_timer is None:  # input goes on (a reset)
            self._arm_idle_timer(self.limits.idle_timeout_seconds)

    async def force_final(self) -> None:
        """End the open utterance of every channel now; their finals follow at once
        (``LiveStream.force_final``)."""
        for live in self.lives:
            await live.force_final()

    def finish(self) -> None:
        """End of input on every channel (their last results follow); stops the idle timer."""
        for live in self.lives:
            live.finish()
        self._stop_idle_timer()

    @property
    def text_format(self) -> str:
        """The level of its finals (``display``): its ``text_format`` option, else the
        server's ``text_format``."""
        return self.options.text_format or self.limits.text_format

    @property
    def finished(self) -> bool:
        return all(live.stream.input_done for live in self.lives)

    async def feed(self, data: bytes) -> None:
        """One binary message: decoded, split into channels and fed (waits while the engine
        is behind). Raises ClientError for bad audio, an oversized message, too long a
        stream."""
        if self._accept(data):
            await self._wait_pending()

    async def _wait_pending(self) -> None:
        """Wait until every stream is under the engine's pending limit; each wait counted
        (and logged when long) as a pause of the reads."""
        for live in self.lives:
            waited = await live.wait_pending()
            if waited:
                self._paused(waited)

    def _accept(self, data: bytes) -> bool:
        """``feed`` up to its wait: True when a stream is over the engine's pending limit.
        With one channel nothing changes before an error is raised (the stream leaves
        unusable audio untouched)."""
        limits = self.limits
        if len(data) > limits.max_message_bytes:
            raise ClientError("too_big", f"message of {len(data)} bytes is over the limit of "
                                         f"{limits.max_message_bytes} bytes")
        if not data:
            return False
        opts = self.options
        try:
            samples = decode_pcm(data, opts.encoding, opts.channels)
        except AudioInputError as e:
            raise ClientError("bad_audio", str(e)) from None
        seconds = len(samples) / opts.channels / opts.sample_rate
        if self.audio_seconds + seconds > limits.max_stream_seconds:
            raise ClientError("too_long", f"stream is over the limit of "
                                          f"{limits.max_stream_seconds:g} s of audio")
        over = False
        for live, channel in zip(self.lives, deinterleave(samples, opts.channels)):
            try:
                over = live.accept(opts.sample_rate, channel) or over
            except AudioInputError as e:
                raise ClientError("bad_audio", str(e)) from None
        self.audio_seconds += seconds
        self.metrics.audio.inc(seconds * opts.channels)
        return over

    # -- audio taken as it arrives ---------------------------------------------------------
    def _take_audio(self, session, data: bytes) -> bool:
        """A binary message straight from the WebSocket layer (``wsframes``: called in its
        ``data_received``), fed now when that is exactly what ``receive`` and the session
        would do with it: the session waits for a message (nothing is queued before this
        one, no command is under way), takes binary messages as audio only
        (``session.binary_is_audio``), no interruption is pending, one channel, no stream
        over the pending limit, and the message is valid. Anything else returns False
        before changing anything: the message then takes the usual way through the queue
        (its error, its wait and its order as always). Audio that puts a stream over the
        limit holds the socket's reads until the engine has caught up (``_hold_reads``),
        as the wait in ``feed`` does."""
        if (self._reader is None or self._interrupt is not None or self._holding is not None
                or len(self.lives) != 1 or not session.binary_is_audio
                or self.lives[0].over_limit):
            return False
        try:
            over = self._accept(data)
        except ClientError:
            return False
        self._last_message = time.monotonic()
        self.direct_messages += 1
        if over:
            self._hold_reads()
        return True

    def _hold_reads(self) -> None:
        """Back-pressure for audio taken as it arrives: the socket is not read until every
        stream is under the pending limit again (counted and logged as a pause)."""
        self._reads.pause_reads()
        self._holding = asyncio.ensure_future(self._release_reads())

    async def _release_reads(self) -> None:
        try:
            await self._wait_pending()
        finally:
            self._holding = None
            self._reads.resume_reads()

    def _paused(self, seconds: float) -> None:
        """Its reads paused ``seconds`` (back-pressure): counted, and logged when long."""
        self.pauses += 1
        self.paused_seconds += seconds
        self.metrics.pauses.inc()
        self.metrics.paused.inc(seconds)
        if seconds >= PAUSE_LOG_SECONDS:
            log.info(json.dumps({"event": "reads_paused", "id": self.id,
                                 "seconds": round(seconds, 3),
                                 "max_pending_seconds": self.limits.engine.max_pending_seconds}))

    # -- messages in -----------------------------------------------------------------------
    def start(self) -> None:
        """Start taking messages (after the handshake was accepted): the idle timer runs."""
        self._started = True
        self._arm_idle_timer(self.limits.idle_timeout_seconds)

    async def receive(self):
        """The next message: ``bytes`` or ``str``, or ``DRAIN`` (once) when the server
        starts draining. Raises Disconnected when the client left and ClientError
        (idle_timeout) when it sent nothing for too long."""
        message = None
        if self._interrupt is None and self._disconnect is None:
            message = await self._read_socket()
        interrupt, self._interrupt = self._interrupt, None
        if interrupt == "drain":  # (a message is never read with an interruption set)
            return DRAIN
        if interrupt == "idle":
            raise ClientError("idle_timeout", f"no message for "
                                              f"{self.limits.idle_timeout_seconds:g} s")
        if message is None or message["type"] == "websocket.disconnect":
            self._disconnect = message = self._disconnect or message
            self.close_code = message.get("code")
            raise Disconnected(f"client closed ({message.get('code')})")
        self._last_message = time.monotonic()
        if message.get("bytes") is not None:
            return message["bytes"]
        return message.get("text") or ""

    async def _read_socket(self) -> dict | None:
        """One message from the socket; None when an interruption cancelled the wait."""
        task = self._reader = asyncio.current_task()
        self._last_message = time.monotonic()  # the idle time counts from here
        try:
            return await self.websocket.receive()
        except asyncio.CancelledError:
            if not self._interrupting:  # not ours: the task itself is being cancelled
                raise
            # ours (Python 3.11+ counts requests: one from elsewhere as well still stops it)
            if hasattr(task, "uncancel") and task.uncancel() > 0:
                raise
            return None
        except Exception as e:  # the socket broke
            return {"type": "websocket.disconnect", "code": 1006, "reason": repr(e)}
        finally:
            self._reader = None
            self._interrupting = False

    def _interrupt_with(self, kind: str) -> None:
        """``receive`` returns (drain) or raises (idle) for ``kind`` next: now, when it is
        waiting on the socket. The drain wins over an idle timeout not yet seen."""
        self._interrupt = kind if kind == "drain" else self._interrupt or kind
        if self._reader is not None and not self._interrupting:
            self._interrupting = True
            self._reader.cancel()

    def request_drain(self) -> None:
        """The server is shutting down: ``receive`` returns DRAIN next."""
        self._interrupt_with("drain")

    def _arm_idle_timer(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._idle_timer = loop.call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        timeout = self.limits.idle_timeout_seconds
        quiet = time.monotonic() - self._last_message
        busy = self._reader is None or self._holding is not None  # with the last message
        if quiet >= timeout and not busy:  # waited that long for a message
            self._interrupt_with("idle")
        elif busy:
            self._arm_idle_timer(timeout)
        else:
            self._arm_idle_timer(max(timeout - quiet, 0.01))

    def _stop_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    # -- messages out ----------------------------------------------------------------------
    async def send(self, text: str) -> None:
        try:
            await self.websocket.send_text(text)
        except Exception as e:  # the client is gone (starlette raises several kinds)
            raise Disconnected(f"send failed: {e!r}") from None

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.close_code = code
        self.close_reason = self.close_reason or reason
        await self._record_end()
        try:
            await self.websocket.close(code, reason[:120])
        except Exception:  # already closed by the client
            pass

    async def fail(self, error: ClientError, session=None) -> None:
        """Tell the client what went wrong and close with the kind's code (or with the
        message, code and reason of ``session.error_reply(error)`` when the protocol has
        its own)."""
        if error.kind != "decode_failed":  # counted once by the engine's observer
            self.metrics.errors.labels(error.kind).inc()
        self.close_reason = f"{error.kind}: {error}"
        self.failed = True
        text, code, reason = error_json(error), error.code, str(error)
        if hasattr(session, "error_reply"):
            text, code, reason = session.error_reply(error)
        try:
            await self.send(text)
        except Disconnected:
            pass
        await self.close(code, reason)

    # -- sessions --------------------------------------------------------------------------
    async def serve(self, session) -> None:
        """Serve one client with ``session`` until it closes, fails or leaves (Disconnected
        propagates: the caller releases the connection). A session with ``opening``
        (OpenAI Realtime) first sends what it returns."""
        if hasattr(session, "opening"):
            await self._run(session, session.opening())
        if session.push_results:
            await self._serve_pushed(session)
        else:
            await self._serve_replies(session)

    async def _run(self, session, commands) -> bool:
        """Carry out a session's commands in order; True once the session closed."""
        for command in commands:
            if isinstance(command, Feed):
                await self.feed(command.data)
            elif isinstance(command, Finish):
                self.finish()
            elif isinstance(command, ForceFinal):
                if any(live.stream.state.vad is not None for live in self.lives):
                    raise ClientError("bad_message", f"{command.request} is not available with "
                                      "vad=true: the voice activity detector's silence ends "
                                      "utterances")
                await self.force_final()
            elif isinstance(command, Send):
                await self.send(command.text)
            elif isinstance(command, Reply):
                for channel, live in enumerate(self.lives):
                    await live.wait_decoded()
                for channel, live in enumerate(self.lives):
                    try:
                        results = await live.next_results() if live.done else live.pop_results()
                    except DecodeError as e:
                        raise ClientError("decode_failed", str(e)) from None
                    results = [redacted(await formatted(r, self.text_format),
                                        self.redaction, self.options.redact)
                               for r in results]
                    for result in results:
                        await self._store(channel, result)
                    await self._run(session, session.reply(channel, results,
                                                           self.audio_seconds))
            elif isinstance(command, Reopen):
                options = command.options
                try:  # heavy builds (a grammar) in an executor, then the streams open
                    await self.engine.prepare(options.search, options.hotwords, options.phrases,
                                              options.keywords)
                    self.open_streams(options)
                except StreamdecError as e:  # TokenizeError / ConfigError
                    raise ClientError("bad_config", f"config: {e}") from None
            elif isinstance(command, Retune):
                if command.options.endpoint != self.options.endpoint:
                    for live in self.lives:  # read at each chunk's gather, on this thread
                        live.stream.endpoint = command.options.endpoint
                self.options = command.options
            elif isinstance(command, Close):
                await self.close(command.code, command.reason)
                return True
            else:
                raise TypeError(f"not a session command: {command!r}")
        return False

    async def _read(self, session) -> None:
        while not await self._run(session, session.receive(await self.receive())):
            pass

    async def _serve_replies(self, session) -> None:
        """A request/reply session (Vosk): one message at a time, each answered in turn."""
        try:
            try:
                await self._read(session)
            except ClientError as e:
                if e.after_results:  # the results of the audio so far, then the error
                    await self._run(session, [Finish(), Reply()])
                raise
        except ClientError as e:
            await self.fail(e, session)

    async def _push(self, session, channel: int) -> None:
        try:
            async for result in self.lives[channel].results():
                if isinstance(result, KeywordEvent):  # a stream opened with keywords
                    await self._run(session, session.keyword(channel, result))
                    continue
                result = redacted(await formatted(result, self.text_format),
                                  self.redaction, self.options.redact)
                await self._store(channel, result)
                await self._run(session, session.result(channel, result))
        except DecodeError as e:
            raise ClientError("decode_failed", str(e)) from None

    async def _serve_pushed(self, session) -> None:
        """A session whose results are sent as they come (sherpa-onnx): the socket is read
        while the results are sent; when every channel has its last result, the session
        ends."""
        sending = asyncio.ensure_future(asyncio.gather(
            *[self._push(session, c) for c in range(len(self.lives))]))
        reading = asyncio.ensure_future(self._read(session))
        if self._reads is not None and hasattr(session, "binary_is_audio"):
            self._reads.binary_sink = lambda data: self._take_audio(session, data)
        try:
            await asyncio.wait({sending, reading}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done() and not sending.done():
                error = reading.exception()
                if isinstance(error, ClientError) and error.after_results:
                    self.finish()
                    await sending  # the results of the audio sent so far, then the error
                    await self.fail(error, session)
                    return
                if isinstance(error, ClientError):
                    await self.fail(error, session)
                    return
                if error is not None and not isinstance(error, Disconnected):
                    raise error
                return  # the client left: its streams are dropped
            error = sending.exception()
            if isinstance(error, ClientError):
                await self.fail(error, session)
            elif isinstance(error, Disconnected):
                return
            elif error is not None:
                raise error
            else:
                await self._run(session, session.results_ended())
        except Disconnected:
            return
        finally:
            if self._reads is not None:
                self._reads.binary_sink = None
            for task in (sending, reading):
                task.cancel()
            await asyncio.gather(sending, reading, return_exceptions=True)

    async def _store(self, channel: int, result) -> None:
        """A final into the transcript store before it is sent (``recording``)."""
        if self.record_id is not None:
            await store_final(self.records, self.record_id, str(channel), channel, result)

    # -- end ---------------------------------------------------------------------------------
    async def _record_end(self) -> None:
        """The session's end into the store before the close reaches the client (a client
        that reads its transcript once closed finds it ended); a store slower than
        ``END_WAIT`` seconds does not hold the close up (the end stays queued)."""
        if self.record_id is None or self._end_recorded:
            return
        self._end_recorded = True
        try:
            await asyncio.wait_for(self.records.ended(
                self.record_id, end_status(self.failed, ""), self.close_reason or "normal"),
                END_WAIT)
        except asyncio.TimeoutError:
            pass

    def release(self) -> None:
        """Free everything (the streams too: an abrupt disconnect drops them) and log."""
        self._stop_idle_timer()
        if self._holding is not None:
            self._holding.cancel()
        for live in self.lives:
            live.close()
        if self.record_id is not None and not self._end_recorded:  # the client left
            self.records.end(self.record_id, end_status(self.failed, ""),
                             self.close_reason or "normal")
        log.info(json.dumps({
            "event": "connection", "id": self.id, "peer": self.peer, "protocol": self.protocol,
            "options": self.options.describe(), "audio_seconds": round(self.audio_seconds, 3),
            "duration": round(time.monotonic() - self.started, 3),
            "reads_paused": self.pauses, "paused_seconds": round(self.paused_seconds, 3),
            "direct_messages": self.direct_messages,
            "close_code": self.close_code,
            "close_reason": self.close_reason or "normal"}))
