"""``create_app``: the ASGI app (Starlette) of one listener.

=====================================  =============================================
route                                  what
=====================================  =============================================
WebSocket ``/`` and ``/sherpa``        sherpa-onnx protocol (``/``: Vosk when
                                       ``vosk_at_root``, for the ``--vosk-port``)
WebSocket ``/vosk``                    Vosk protocol
WebSocket ``/twilio``, ``/audiofork``  calls from Twilio Media Streams and FreeSWITCH
                                       mod_audio_fork (``calls``)
WebSocket ``/calls/{call_id}``         a call's results, live (``calls``)
WebSocket ``/v1/listen``               Deepgram's live streaming protocol (``deepgram``)
WebSocket ``/v1/realtime``             OpenAI's Realtime transcription sessions (``realtime``)
WebSocket ``/v3/ws``                   AssemblyAI's universal streaming (``assemblyai``)
GET ``/``, ``/static/...``             the browser captioning page
GET ``/admission``                     what a sherpa handshake with the same query and
                                       headers would be answered (for browsers)
POST ``/v1/audio/transcriptions``      OpenAI-compatible file transcription
POST ``/v1/listen``                    Deepgram's pre-recorded transcription
                                       (``deepgram_files``)
GET ``/calls/{id}/transcript``,       stored transcripts (``transcripts``): JSON, text,
``/streams/{id}/transcript``,          SRT, WebVTT; the listing; DELETE to erase
``/transcripts``
GET ``/health``                        200 JSON: ``status``, ``version``, streams; 503 draining
GET ``/metrics``                       Prometheus text format
=====================================  =============================================

A WebSocket handshake is refused with an HTTP status and a reason: 401 (token), 503
(connection cap, draining), 400 (invalid options, e.g. ``?sample_rate=1``). A browser's
WebSocket API hides that status (a refused handshake is only an ``error`` event), so
``GET /admission`` answers the same question over plain HTTP: the status and reason the
sherpa handshake would get with that query string and those headers (JSON
``{"admitted": false, "status", "reason"}``), or 200 with ``{"admitted": true,
"frame_seconds"}``: the encoder frame, one step of the results' ``timestamps``, from which
a word's end is known (one frame after its last token). It does not reserve a place:
the page asks before connecting, and again to explain a handshake that failed.
(Phrases that the model cannot spell are found only when the stream is made: such a
handshake is refused with 400 although ``/admission`` admitted it.)
The app starts the context's engine in its lifespan if nobody has (an ASGI host that runs
only the app), and stops it then too.
"""

from __future__ import annotations

import contextlib
from importlib import resources
from typing import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from ..errors import ConfigError, ModelLoadError, TokenizeError
from .access import Refusal
from .assemblyai import assemblyai_parser
from .calls import call_routes
from .connection import Connection, Disconnected
from .context import ServerContext
from .deepgram import deepgram_parser
from .deepgram_files import transcribe_deepgram
from .realtime import realtime_parser
from .metrics import CONTENT_TYPE_LATEST
from .options import StreamOptions, parse_options
from .recording import STREAM_ID_HEADER
from .sherpa import SherpaSession
from .transcription import transcribe_upload
from .deliveries import delivery_routes
from .transcripts import transcript_routes
from .vosk import VoskSession

__all__ = ["create_app"]

SHERPA_ENCODING = "f32le"  # the sherpa-onnx protocol's default audio encoding

Session = Callable[[StreamOptions], object]  # a new protocol session for these options
# a protocol's own query (name -> values) read: its options and its session
Parse = Callable[[dict], "tuple[StreamOptions, object]"]


def _web_dir():
    return resources.files("streamdec.web")


def _admission(context: ServerContext, headers, query_params, default_rate: int,
               encoding: str) -> StreamOptions | Refusal:
    """The options of a handshake with these headers and query, or why it is refused."""
    refusal = context.refusal(headers, query_params)
    if refusal is not None:
        return refusal
    query = {k: query_params.getlist(k) for k in query_params.keys()}
    recognizer = context.engine.recognizer
    try:
        options = parse_options(query, sample_rate=default_rate, encoding=encoding,
                                search=recognizer.config.search,
                                endpoint=recognizer.config.endpoint,
                                endpoint_limits=context.config.endpoint_limits())
        recognizer.check_second_pass(options.second_pass, options.local_agreement)
    except ConfigError as e:
        return Refusal(400, str(e))
    return options


def _own_admission(context: ServerContext, headers, query_params, parse: Parse
                   ) -> tuple[StreamOptions, object] | Refusal:
    """A protocol with its own query (a cloud vendor's): its options and session, or why
    the handshake is refused."""
    refusal = context.refusal(headers, query_params)
    if refusal is not None:
        return refusal
    try:
        return parse({k: query_params.getlist(k) for k in query_params.keys()})
    except ConfigError as e:
        return Refusal(400, str(e))


def _websocket_route(context: ServerContext, protocol: str, session: Session,
                     default_rate: Callable[[], int], encoding: str,
                     parse: Parse | None = None):
    """``parse``: a protocol's own reading of the query (its options and session; None:
    ``parse_options`` and ``session(options)``)."""
    async def endpoint(websocket: WebSocket) -> None:
        if parse is None:
            options = _admission(context, websocket.headers, websocket.query_params,
                                 default_rate(), encoding)
            made = None
        else:
            options = _own_admission(context, websocket.headers, websocket.query_params, parse)
            if not isinstance(options, Refusal):
                options, made = options
        if isinstance(options, Refusal):
            return await context.refuse(websocket, options)
        if options.keywords is not None and protocol != "sherpa":
            return await context.refuse(websocket, Refusal(
                400, f"keywords: the {protocol} protocol cannot carry keyword events; the "
                "sherpa-onnx protocol (/sherpa) can"))
        try:  # heavy builds (grammars, hotwords) in an executor, then the streams open
            await context.engine.prepare(options.search, options.hotwords, options.phrases,
                                         options.keywords)
            connection = Connection(context.engine, context.config, context.metrics,
                                    websocket, protocol, options, context.records,
                                    context.redaction)
        # e.g. phrases the model cannot spell, or vad=true without the VAD's package
        except (ConfigError, TokenizeError, ModelLoadError) as e:
            return await context.refuse(websocket, Refusal(400, str(e)))
        context.admit(protocol, connection)
        headers = list(context.accept_headers or [])
        if connection.record_id is not None:  # its transcript: GET /streams/{id}/transcript
            headers.append((STREAM_ID_HEADER, connection.record_id.encode()))
        try:
            await websocket.accept(headers=headers or None)
            connection.start()
            await connection.serve(session(options) if made is None else made)
        except Disconnected:
            pass  # the client left: its streams are dropped below
        finally:
            connection.release()
            context.release(protocol, connection)

    return endpoint


def create_app(context: ServerContext, *, vosk_at_root: bool = False) -> Starlette:
    """The app of one listener over ``context`` (shared by every listener of a server)."""
    def sherpa_rate() -> int:
        return context.audio.sample_rate

    recognizer = context.engine.recognizer

    def sherpa_session(options: StreamOptions) -> SherpaSession:
        return SherpaSession(options.channels, recognizer.meta.encoder_frame_seconds)

    def vosk_session(options: StreamOptions) -> VoskSession:
        return VoskSession(options, recognizer.config.search, recognizer.config.endpoint,
                           context.config.endpoint_limits())

    sherpa = _websocket_route(context, "sherpa", sherpa_session, sherpa_rate, SHERPA_ENCODING)
    deepgram = _websocket_route(context, "deepgram", sherpa_session, sherpa_rate,
                                SHERPA_ENCODING, deepgram_parser(context))
    realtime = _websocket_route(context, "realtime", sherpa_session, sherpa_rate,
                                SHERPA_ENCODING, realtime_parser(context))
    assemblyai = _websocket_route(context, "assemblyai", sherpa_session, sherpa_rate,
                                  SHERPA_ENCODING, assemblyai_parser(context))
    vosk = _websocket_route(context, "vosk", vosk_session, lambda: 8000, "s16le")

    async def index(request: Request) -> Response:
        return HTMLResponse((_web_dir() / "index.html").read_text(encoding="utf-8"))

    async def admission(request: Request) -> Response:
        options = _admission(context, request.headers, request.query_params,
                             sherpa_rate(), SHERPA_ENCODING)
        if isinstance(options, Refusal):
            return JSONResponse({"admitted": False, "status": options.status,
                                 "reason": options.reason}, options.status)
        meta = context.engine.recognizer.meta
        return JSONResponse({"admitted": True, "frame_seconds": meta.encoder_frame_seconds})

    async def health(request: Request) -> Response:
        if context.draining:
            return JSONResponse({"status": "draining"}, 503)
        return JSONResponse(context.health())

    async def metrics(request: Request) -> Response:
        return Response(context.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def transcriptions(request: Request) -> Response:
        return await transcribe_upload(context, request)

    async def prerecorded(request: Request) -> Response:
        return await transcribe_deepgram(context, request)

    routes = [WebSocketRoute("/", vosk if vosk_at_root else sherpa),
              WebSocketRoute("/vosk", vosk),
              Route("/health", health), Route("/metrics", metrics)]
    if not vosk_at_root:
        routes += [WebSocketRoute("/sherpa", sherpa),
                   Route("/", index), Route("/admission", admission),
                   Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
                   WebSocketRoute("/v1/listen", deepgram),
                   Route("/v1/listen", prerecorded, methods=["POST"]),
                   WebSocketRoute("/v1/realtime", realtime),
                   WebSocketRoute("/v3/ws", assemblyai),
                   Mount("/static", StaticFiles(directory=str(_web_dir() / "static"),
                                                check_dir=False))]
        routes += transcript_routes(context)  # before /calls/{call_id}: GET .../transcript
        routes += delivery_routes(context)
        routes += call_routes(context)  # /twilio, /audiofork, /calls/{call_id}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        started = not context.engine.running
        context.start()
        if started:
            await context.warm_up()
        try:
            yield
        finally:
            if started:
                await context.stop()

    return Starlette(routes=routes, lifespan=lifespan)
