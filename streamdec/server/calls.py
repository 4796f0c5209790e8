"""Calls from telephony platforms: the I/O around the protocol state machines.

=====================================  =================================================
where                                  what
=====================================  =================================================
WebSocket ``/twilio``                  Twilio Media Streams (``twilio.TwilioProtocol``)
WebSocket ``/audiofork``               FreeSWITCH mod_audio_fork (``audiofork``); results
                                       also go back on the socket
TCP ``--audiosocket-port``             Asterisk AudioSocket (``audiosocket``; off by default)
WebSocket ``/calls/{call_id}``         a call's results and events, live (subscribers)
=====================================  =================================================

A ``CallSession`` runs one connection: it reads messages (``Transport``), hands them to the
protocol, and acts on the events that come back: one engine stream per leg, opened by
``open_call_stream`` (the one place where per-stream options of calls are set: the voice
activity detector unless ``[server] call_vad = false``, the keywords spotted:
``call_keywords``), fed with
the leg's audio; every result and event goes to the ``CallHub`` (subscribers, webhook)
tagged with the call's id and the leg, each final with ``display`` at the call's text
format (``call_settings``; ``[server] call_text_format`` by default; ``display.py``), each
keyword heard as a ``keyword`` message (``call_events.keyword_message``), stored first. A
bad message ends that call alone: the
connection is closed with the error's close code (``connection.CLOSE_CODES``; an audio
fork first gets ``{"type": "error"}``), a log line names the call, and the legs' audio
received so far is still decoded: its finals reach the subscribers, then ``call_end``
with the error. A hangup, ``stop`` or a dropped connection ends the call the same way,
without the error. One log line per call (``"event": "call"``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any, Callable, Protocol

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from ..core.results import KeywordEvent
from ..engine import Engine, LiveStream
from ..errors import AudioInputError, ClientError, ConfigError, DecodeError, TokenizeError
from .access import Refusal
from .audiofork import SUBPROTOCOL, AudioForkProtocol, reply
from .audiosocket import AudioSocketProtocol
from .call_events import (CallAudio, CallDtmf, CallEnded, CallEvent, CallFailed,
                          CallFinalize, CallNote, CallStarted, call_message,
                          keyword_message, result_message)
from .call_keywords import call_keyword_lines
from .call_settings import CallSettings, call_settings
from .config import ServerConfig
from .display import display_fields, formatted
from .recording import begin_session, end_status, store_final, store_keyword
from .redaction import redacted
from .twilio import TwilioProtocol

__all__ = ["CallSession", "Transport", "open_call_stream", "call_routes",
           "serve_audiosocket", "AUDIOFORK_SUBPROTOCOLS"]

log = logging.getLogger("streamdec.server")

#: subprotocols an audio fork may ask for (newer, older module versions)
AUDIOFORK_SUBPROTOCOLS = (SUBPROTOCOL, "audiostream.drachtio.org")
_DRAIN = object()
_TCP_READ = 65536


def open_call_stream(engine: Engine, config: ServerConfig, endpoint=None,
                     second_pass: bool | None = None,
                     keywords: tuple[str, ...] | None = None) -> LiveStream:
    """The engine stream of one leg of a call: with the voice activity detector when
    ``config.call_vad`` (half of a leg is silence: the other side talking); ``endpoint``:
    the call's rules (None: the server's); ``second_pass``: the call's choice (None: the
    server's default; ClientError ``bad_config`` for true without one); ``keywords``: the
    lines it spots (``call_keywords``; None: none)."""
    try:
        return engine.open(vad=config.call_vad, endpoint=endpoint, second_pass=second_pass,
                           keywords=keywords)
    except (ConfigError, TokenizeError) as e:
        raise ClientError("bad_config", str(e)) from None


def call_keywords(context, settings: CallSettings) -> tuple[str, ...] | None:
    """The keyword lines of a call with ``settings``: the server's with the call's own
    (``call_keywords.call_keyword_lines``; ClientError ``bad_config``)."""
    recognizer = context.engine.recognizer
    return call_keyword_lines(context.config.call_keywords, settings.keywords,
                              settings.keywords_from, recognizer.symbols,
                              recognizer.keyword_search.config)


class Transport(Protocol):
    """What a session needs of its connection."""

    peer: str

    async def receive(self) -> str | bytes | None:
        """The next message (or bytes); None once the peer closed."""

    async def send_text(self, text: str) -> None:
        """Send a text message (may be a no-op); raises nothing when the peer is gone."""

    async def close(self, code: int, reason: str) -> None:
        """Close (idempotent)."""


class WebSocketTransport:
    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        client = websocket.client
        self.peer = f"{client.host}:{client.port}" if client else "-"
        self.received_close = False  # the peer's close (or a broken socket) was read
        self.send_failed = False  # the peer no longer takes messages (it may still send)
        self.closed = False  # we closed

    async def receive(self) -> str | bytes | None:
        """Every message the peer sent, in order (also after a send failed), then None."""
        if self.received_close or self.closed:
            return None
        try:
            message = await self.websocket.receive()
        except Exception:  # the socket broke
            self.received_close = True
            return None
        if message["type"] == "websocket.disconnect":
            self.received_close = True
            return None
        if message.get("bytes") is not None:
            return message["bytes"]
        return message.get("text") or ""

    async def send_text(self, text: str) -> None:
        if not (self.send_failed or self.closed or self.received_close):
            try:
                await self.websocket.send_text(text)
            except Exception:  # the peer is gone (starlette raises several kinds)
                self.send_failed = True

    async def close(self, code: int, reason: str) -> None:
        if not (self.closed or self.received_close):
            self.closed = True
            try:
                await self.websocket.close(code, reason[:120])
            except Exception:
                pass


class TcpTransport:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 read_size: int = _TCP_READ) -> None:
        self.reader, self.writer = reader, writer
        self.read_size = read_size
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "-"

    async def receive(self) -> bytes | None:
        try:
            data = await self.reader.read(self.read_size)
        except OSError:
            return None
        return data or None

    async def send_text(self, text: str) -> None:  # AudioSocket carries no text
        pass

    async def close(self, code: int, reason: str) -> None:
        if not self.writer.is_closing():
            self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


class CallSession:
    """One connection of a telephony platform: one call (see the module notes).

    ``receive`` / ``eof``: the protocol's functions from a message (or bytes) and from the
    peer's close to events; ``replies``: send results and errors back on the socket (audio
    fork)."""

    def __init__(self, context, protocol: str, transport: Transport,
                 receive: Callable[[Any], list[CallEvent]],
                 eof: Callable[[], list[CallEvent]], replies: bool = False) -> None:
        self.context = context
        self.protocol = protocol
        self.transport = transport
        self._receive = receive
        self._eof = eof
        self.replies = replies
        self.call_id: str | None = None
        self.legs: tuple[str, ...] = ()
        self.lives: list[LiveStream] = []
        self.samples: list[int] = []  # per leg
        self.rates: list[int] = []
        self.started = time.monotonic()
        self.failure: ClientError | None = None
        self._pumps: list[asyncio.Task] = []
        self._wake = asyncio.Event()  # drain requested or a leg failed
        self._drain = False
        self.end_reason = ""
        self.close_code: int | None = None
        self.text_format = context.config.call_text_format  # the call's (set at its start)
        self.record_id: str | None = None  # its session in the transcript store
        self.redact: frozenset[str] = frozenset()  # the call's kinds (on the server's)
        self.keywords_heard: list[int] = []  # per leg: keywords heard so far (their seq)

    # -- the context's connection interface -------------------------------------------------
    def request_drain(self) -> None:
        self._drain = True
        self._wake.set()

    # -- the loop --------------------------------------------------------------------------------
    async def run(self) -> None:
        hub = self.context.calls
        try:
            await self._serve()
            self.close_code = 1000 if self.end_reason != "server shutdown" else 1001
        except ClientError as e:
            self.failure = e
            self.end_reason = f"{e.kind}: {e}"
            self.close_code = e.code
            if e.kind != "decode_failed":  # counted once by the engine's observer
                self.context.metrics.errors.labels(e.kind).inc()
            log.warning(json.dumps({"event": "call_error", "call_id": self.call_id,
                                    "protocol": self.protocol, "peer": self.transport.peer,
                                    "kind": e.kind, "error": str(e)}))
            if self.replies:
                await self.transport.send_text(reply("error", {"error": str(e),
                                                               "kind": e.kind}))
            await self.transport.close(e.code, str(e))
        finally:
            for live in self.lives:
                live.finish()
            if self._pumps:  # the legs' last results (each has its is_eof result)
                await asyncio.gather(*self._pumps, return_exceptions=True)
            for live in self.lives:
                live.close()
            if self.record_id is not None:  # after every leg's last final was stored
                self.context.records.end(self.record_id, end_status(
                    self.failure is not None, self.end_reason), self.end_reason or "closed")
            if self.call_id is not None:
                end = {"reason": self.end_reason or "closed"}
                if self.failure is not None:
                    end.update(error=str(self.failure), kind=self.failure.kind)
                hub.end(self.call_id, call_message("call_end", self.call_id, **end))
            await self.transport.close(self.close_code or 1000, self.end_reason)
            self._log()

    async def _serve(self) -> None:
        limits = self.context.config
        while not self.end_reason:
            message = await self._next(limits.idle_timeout_seconds)
            if message is _DRAIN:
                events: list[CallEvent] = [CallEnded("server shutdown")]
            elif message is None:
                events = self._eof()
            else:
                if len(message) > limits.max_message_bytes:
                    raise ClientError("too_big", f"message of {len(message)} bytes is over "
                                                 f"the limit of {limits.max_message_bytes}")
                events = self._receive(message)
            for event in events:
                await self._handle(event)
                if self.failure is not None:
                    raise self.failure

    async def _next(self, timeout: float):
        """The next message, None when the peer closed, _DRAIN on shutdown; ClientError
        (idle_timeout, or a leg's decode_failed)."""
        if self._drain:
            return _DRAIN
        receiving = asyncio.ensure_future(self.transport.receive())
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            done, _ = await asyncio.wait({receiving, woken}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
        if receiving in done:
            return receiving.result()
        receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)
        if self.failure is not None:
            raise self.failure
        if self._drain:
            return _DRAIN
        raise ClientError("idle_timeout", f"no message for {timeout:g} s")

    async def _handle(self, event: CallEvent) -> None:
        hub = self.context.calls
        if isinstance(event, CallStarted):
            await self._start(event)
        elif isinstance(event, CallAudio):
            await self._feed(event)
        elif isinstance(event, CallDtmf):
            leg = {} if event.leg is None else {"leg": self.legs[event.leg],
                                                 "channel": event.leg}
            hub.publish(self.call_id, call_message("dtmf", self.call_id, digit=event.digit,
                                                   time=round(self._position(event.leg), 3),
                                                   **leg))
        elif isinstance(event, CallFinalize):
            await self._finalize()
        elif isinstance(event, CallNote):
            hub.publish(self.call_id, call_message(event.kind, self.call_id, data=event.data))
        elif isinstance(event, CallEnded):
            self.end_reason = event.reason
        elif isinstance(event, CallFailed):
            raise event.error

    async def _start(self, event: CallStarted) -> None:
        engine = self.context.engine
        settings = call_settings(event.settings, engine.recognizer.config.endpoint,
                                 self.context.config.endpoint_limits())  # or bad_config
        self.text_format = settings.text_format or self.text_format
        self.redact = settings.redact
        keywords = call_keywords(self.context, settings)  # or bad_config
        if keywords is not None:  # its graph built off the loop (the server's: at start)
            try:
                await engine.prepare(keywords=keywords)
            except (ConfigError, TokenizeError) as e:
                raise ClientError("bad_config", f"{settings.keywords_from}: {e}") from None
        self.call_id = event.call_id
        self.legs = event.legs
        self.lives = [open_call_stream(engine, self.context.config, settings.endpoint,
                                       settings.second_pass, keywords) for _ in event.legs]
        self.keywords_heard = [0] * len(event.legs)
        self.samples = [0] * len(event.legs)
        self.rates = [0] * len(event.legs)
        if self.context.records is not None:
            self.record_id = begin_session(self.context.records, engine, "call", self.call_id,
                                           self.protocol, {**event.info, "legs": list(event.legs)})
        self.context.calls.begin(self.call_id, call_message(
            "call_start", self.call_id, protocol=self.protocol, legs=list(event.legs),
            info=event.info))
        self._pumps = [asyncio.ensure_future(self._pump(n)) for n in range(len(self.lives))]
        log.info(json.dumps({"event": "call_start", "call_id": self.call_id,
                             "protocol": self.protocol, "peer": self.transport.peer,
                             "legs": list(event.legs)}, default=str))

    async def _feed(self, event: CallAudio) -> None:
        limit = self.context.config.max_stream_seconds
        leg = event.leg
        seconds = (self.samples[leg] + len(event.samples)) / event.sample_rate
        if seconds > limit:
            raise ClientError("too_long", f"call is over the limit of {limit:g} s of audio")
        self.samples[leg] += len(event.samples)
        self.rates[leg] = event.sample_rate
        self.context.metrics.audio.inc(len(event.samples) / event.sample_rate)
        try:
            await self.lives[leg].feed(event.sample_rate, event.samples)
        except AudioInputError as e:
            raise ClientError("bad_audio", str(e)) from None

    async def _finalize(self) -> None:
        """Each leg's open utterance ends now (legs with voice activity detection: their
        silence ends utterances, so they are left alone and the platform is told)."""
        if any(live.stream.state.vad is not None for live in self.lives):
            if self.replies:
                await self.transport.send_text(reply("error", {
                    "error": "Finalize is not available with voice activity detection: "
                             "its silence ends utterances", "kind": "unsupported"}))
            return
        for live in self.lives:
            await live.force_final()

    def _position(self, leg: int | None) -> float:
        """Seconds of audio of ``leg`` (of the longest leg when None) received so far."""
        legs = range(len(self.legs)) if leg is None else [leg]
        return max((self.samples[n] / self.rates[n] for n in legs if self.rates[n]),
                   default=0.0)

    async def _pump(self, leg: int) -> None:
        """Results of one leg to the hub (and back on the socket), until its last one."""
        hub = self.context.calls
        try:
            async for result in self.lives[leg].results():
                if isinstance(result, KeywordEvent):  # the call spots keywords
                    await self._keyword(leg, result)
                    continue
                result = await formatted(result, self.text_format)  # finals, off the loop
                result = redacted(result, self.context.redaction, self.redact)
                message = result_message(self.call_id, self.protocol, self.legs[leg], leg,
                                         result)
                message.update(display_fields([result]))
                if self.record_id is not None:  # stored before anyone gets it
                    await store_final(self.context.records, self.record_id, self.legs[leg],
                                      leg, result, message if self.context.deliverer
                                      is not None else None)
                hub.publish(self.call_id, message)
                if self.replies and result.is_final and result.text:
                    await self.transport.send_text(reply("transcription", message))
        except DecodeError as e:
            if self.failure is None:
                self.failure = ClientError("decode_failed", f"leg {self.legs[leg]}: {e}")
            self._wake.set()
        except ClientError as e:  # the formatting models could not be used
            if self.failure is None:
                self.failure = e
            self._wake.set()

    async def _keyword(self, leg: int, event: KeywordEvent) -> None:
        """A keyword heard on ``leg``: stored (with its webhook row), then to the hub."""
        message = keyword_message(self.call_id, self.protocol, self.legs[leg], leg, event)
        seq = self.keywords_heard[leg]
        self.keywords_heard[leg] += 1
        if self.record_id is not None:  # stored before anyone gets it
            await store_keyword(self.context.records, self.record_id, self.legs[leg], leg,
                                seq, event, message if self.context.deliverer is not None
                                else None)
        self.context.calls.publish(self.call_id, message)

    def _log(self) -> None:
        log.info(json.dumps({
            "event": "call", "call_id": self.call_id, "protocol": self.protocol,
            "peer": self.transport.peer, "legs": list(self.legs),
            "audio_seconds": [round(s / r, 3) if r else 0.0
                              for s, r in zip(self.samples, self.rates)],
            "duration": round(time.monotonic() - self.started, 3),
            "close_code": self.close_code, "reason": self.end_reason or "closed"}))


# -- endpoints ---------------------------------------------------------------------------------
def _query(websocket: WebSocket) -> dict[str, str]:
    return {k: websocket.query_params[k] for k in websocket.query_params.keys()}


async def _run_session(context, session: CallSession) -> None:
    context.admit(session.protocol, session)
    try:
        await session.run()
    finally:
        context.release(session.protocol, session)


def call_routes(context) -> list[WebSocketRoute]:
    """The WebSocket routes of calls: ``/twilio``, ``/audiofork``, ``/calls/{call_id}``
    (each accepted socket names its worker in ``X-Streamdec-Replica``, as the others do)."""

    async def twilio(websocket: WebSocket) -> None:
        refusal = context.twilio_refusal(websocket)
        if refusal is not None:
            return await context.refuse(websocket, refusal)
        await websocket.accept(headers=context.accept_headers)
        machine = TwilioProtocol()
        session = CallSession(context, "twilio", WebSocketTransport(websocket),
                              machine.receive, lambda: [CallEnded("disconnected")])
        await _run_session(context, session)

    async def audiofork(websocket: WebSocket) -> None:
        refusal = context.refusal(websocket.headers, websocket.query_params)
        if refusal is not None:
            return await context.refuse(websocket, refusal)
        try:
            machine = AudioForkProtocol(_query(websocket), default_id=str(uuid.uuid4()))
            if machine.url_settings is not None:  # checked at the handshake, as sherpa's
                call_keywords(context, call_settings(
                    [machine.url_settings], context.engine.recognizer.config.endpoint,
                    context.config.endpoint_limits()))
        except ClientError as e:
            return await context.refuse(websocket, Refusal(400, str(e)))
        asked = websocket.scope.get("subprotocols") or []
        chosen = next((p for p in asked if p in AUDIOFORK_SUBPROTOCOLS), None)
        await websocket.accept(subprotocol=chosen, headers=context.accept_headers)
        session = CallSession(context, "audiofork", WebSocketTransport(websocket),
                              machine.receive, lambda: [CallEnded("disconnected")],
                              replies=True)
        await _run_session(context, session)

    async def subscriber(websocket: WebSocket) -> None:
        refusal = context.refusal(websocket.headers, websocket.query_params, decodes=False)
        if refusal is not None:
            return await context.refuse(websocket, refusal)
        await _run_subscriber(context, websocket, websocket.path_params["call_id"])

    return [WebSocketRoute("/twilio", twilio), WebSocketRoute("/audiofork", audiofork),
            WebSocketRoute("/calls/{call_id}", subscriber)]


class _SubscriberConnection:
    """A subscriber as the context sees a connection: on drain it leaves unless its call
    is live (then it ends with the call)."""

    def __init__(self, hub, sub) -> None:
        self.hub, self.sub = hub, sub

    def request_drain(self) -> None:
        if self.hub.waiting(self.sub):
            self.sub.finish()


async def _run_subscriber(context, websocket: WebSocket, call_id: str) -> None:
    """One subscriber, admitted (it counts against ``max_connections``) from before its
    handshake's answer: the socket opens once every worker knows of it (``in_step``)."""
    hub = context.calls
    sub = hub.subscribe(call_id)
    connection = _SubscriberConnection(hub, sub)
    context.admit("calls", connection)
    reading = None
    try:
        await hub.in_step(sub)
        await websocket.accept(headers=context.accept_headers)
        transport = WebSocketTransport(websocket)
        reading = asyncio.ensure_future(transport.receive())  # ends when it leaves
        while True:
            waiting = asyncio.ensure_future(sub.wait())
            await asyncio.wait({waiting, reading}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if reading.done():  # left (or sent something: subscribers only listen)
                return
            if sub.dropped:
                await transport.close(1008, f"subscriber too slow: over {sub.capacity} "
                                            "messages behind")
                return
            for message in sub.take():
                await transport.send_text(json.dumps(message, ensure_ascii=False,
                                                     default=str))
            if sub.ended and not sub.messages:
                await transport.close(1000, "call ended")
                return
    finally:
        if reading is not None:
            reading.cancel()
        hub.unsubscribe(sub)
        context.release("calls", connection)


# -- AudioSocket (TCP) -----------------------------------------------------------------------
async def serve_audiosocket(context, sock) -> asyncio.base_events.Server:
    """An asyncio server of AudioSocket calls on the listening socket ``sock``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # reads of at most max_message_bytes: a read is not a message the peer chose
        transport = TcpTransport(reader, writer, min(_TCP_READ, context.config.max_message_bytes))
        reason = context.access.capacity_refusal()
        if reason is not None:
            log.warning(json.dumps({"event": "call_refused", "protocol": "audiosocket",
                                    "peer": transport.peer, "reason": reason}))
            context.metrics.errors.labels("refused_503").inc()
            await transport.close(1013, reason)
            return
        machine = AudioSocketProtocol()
        session = CallSession(context, "audiosocket", transport, machine.receive_data,
                              machine.receive_eof)
        await _run_session(context, session)

    return await asyncio.start_server(handle, sock=sock)
