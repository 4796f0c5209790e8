"""``POST /v1/listen``: Deepgram's pre-recorded transcription, as Deepgram documents it.

The body is the audio file itself (any format soundfile reads; Deepgram's SDKs send it as
``application/octet-stream``), or raw audio when the query names its ``encoding`` and
``sample_rate``, or a multipart form whose first file part is the audio. The query takes
the live protocol's parameters that mean something for a file (``deepgram``): ``punctuate``,
``smart_format``, ``keywords`` / ``keyterm``, ``language``, ``endpointing`` (where the
utterances end), ``utterances`` (the ``utterances`` list), and ignores or refuses the others
the same way. Channels are averaged (``multichannel=true`` is refused).

The answer is Deepgram's: ``{"metadata": {"transaction_key", "request_id", "sha256",
"created", "duration", "channels", "models", "model_info"}, "results": {"channels":
[{"alternatives": [{"transcript", "confidence", "words": [{"word", "start", "end",
"confidence", "punctuated_word"}]}]}], "utterances": [...]}}``; an error is Deepgram's
``{"err_code", "err_msg", "request_id"}`` with its status (400, 401, 413, 408, 503). The
limits are the OpenAI file endpoint's (``transcription``): ``max_upload_bytes``,
``idle_timeout_seconds`` between body bytes, ``max_stream_seconds`` of audio.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import uuid
from typing import Mapping, Sequence

import numpy as np

from ..audio.pcm import decode_pcm
from ..core.results import Result
from ..engine import run_stream
from ..errors import AudioInputError, ConfigError, DecodeError, StreamdecError, UploadError
from ..textfmt import default_formatter
from .deepgram import parse_deepgram_query
from .transcription import FORM_SLACK, _Body, read_upload

__all__ = ["prerecorded_query", "prerecorded_response", "transcribe_deepgram"]

#: the live parameters a file request may not give, and the file's own ones
_LIVE_ONLY = ("interim_results", "vad_events", "utterance_end_ms")
_FILE_ONLY = ("utterances", "utt_split", "paragraphs", "filler_words", "measurements",
              "detect_language", "summarize", "topics", "intents", "sentiment",
              "custom_topic", "custom_topic_mode", "custom_intent", "custom_intent_mode")
#: file features only Deepgram's service has: refused when on
_FILE_REFUSED = ("paragraphs", "filler_words", "measurements", "detect_language",
                 "summarize", "topics", "intents", "sentiment", "custom_topic",
                 "custom_intent")


def prerecorded_query(query: Mapping[str, Sequence[str]], **server) -> tuple:
    """(stream options, settings, utterances wanted) of a ``POST /v1/listen`` query
    (``server``: ``parse_deepgram_query``'s server defaults). OptionError (400) as the live
    query's, and for a live-only parameter or a file feature only Deepgram has."""
    query = dict(query)
    for name in _LIVE_ONLY:
        if name in query:
            raise ConfigError(f"{name} is for live streaming only")
    for name in _FILE_REFUSED:
        value = (query.get(name) or [""])[-1]
        if value.lower() not in ("", "false"):
            raise ConfigError(f"{name} is not supported by this server")
    utterances = [v.lower() for v in query.pop("utterances", [])]
    if utterances and utterances[-1] not in ("true", "false"):
        raise ConfigError(f"utterances must be true or false, got {utterances[-1]!r}")
    for name in _FILE_ONLY:
        query.pop(name, None)
    if "multichannel" in query and query["multichannel"][-1].lower() == "true":
        raise ConfigError("multichannel is not supported for files: channels are averaged")
    query.pop("multichannel", None)
    raw = "encoding" in query
    if not raw:  # a file: its header says what the audio is
        query = {**query, "encoding": ["linear16"], "sample_rate": ["16000"]}
        query.pop("channels", None)
    options, settings = parse_deepgram_query(query, **server)
    return options, settings, bool(utterances) and utterances[-1] == "true", raw


def _words(results: Sequence[Result]) -> list[dict]:
    out = []
    for r in results:
        shown = r.display is not None and len(r.display_words) == len(r.words)
        for w, p in zip(r.words, r.display_words if shown else r.words):
            out.append({"word": w.text, "start": round(w.start, 3), "end": round(w.end, 3),
                        "confidence": round(w.conf, 6), "punctuated_word": p.text})
    return out


def _confidence(results: Sequence[Result]) -> float:
    log_probs = [p for r in results for p in r.log_probs]
    return round(math.exp(sum(log_probs) / len(log_probs)), 6) if log_probs else 0.0


def _transcript(results: Sequence[Result]) -> str:
    return " ".join((r.display if r.display is not None else r.text).strip()
                    for r in results if r.text)


def prerecorded_response(finals: Sequence[Result], duration: float, sha256: str,
                         model: str, utterances: bool, request_id: str | None = None) -> dict:
    """Deepgram's response body for a file's ``finals`` (pure)."""
    request_id = request_id or str(uuid.uuid4())
    model_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, model))
    spoken = [r for r in finals if r.text]
    body: dict = {
        "metadata": {
            "transaction_key": "deprecated", "request_id": request_id, "sha256": sha256,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "duration": round(duration, 3), "channels": 1, "models": [model_uuid],
            "model_info": {model_uuid: {"name": model, "version": "streamdec",
                                        "arch": "transducer"}}},
        "results": {"channels": [{"alternatives": [{
            "transcript": _transcript(spoken), "confidence": _confidence(spoken),
            "words": _words(spoken)}]}]}}
    if utterances:
        body["results"]["utterances"] = [
            {"start": round(r.span[0], 3), "end": round(r.span[1], 3),
             "confidence": _confidence([r]), "channel": 0, "transcript": _transcript([r]),
             "words": _words([r]), "id": str(uuid.uuid5(uuid.NAMESPACE_URL,
                                                        f"{request_id}/{n}"))}
            for n, r in enumerate(spoken)]
    return body


async def _read_body(body: _Body) -> bytes:
    parts = []
    while True:
        message = await body()
        if message["type"] != "http.request":
            raise UploadError("the client left before the body was sent")
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def transcribe_deepgram(context, request):
    """The endpoint: the query, the body, the engine's decode, Deepgram's answer."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    request_id = str(uuid.uuid4())

    def error(status: int, message: str, kind: str, code: str = "Bad Request"):
        context.metrics.errors.labels(kind).inc()
        headers = {"connection": "close"} if status in (408, 413) else None
        return JSONResponse({"err_code": code, "err_msg": message, "request_id": request_id},
                            status, headers)

    refusal = context.refusal(request.headers, request.query_params)
    if refusal is not None:
        code = "INVALID_AUTH" if refusal.status == 401 else "Service Unavailable"
        return JSONResponse({"err_code": code, "err_msg": refusal.reason,
                             "request_id": request_id}, refusal.status)
    recognizer = context.engine.recognizer
    try:
        options, settings, utterances, raw = prerecorded_query(
            {k: request.query_params.getlist(k) for k in request.query_params.keys()},
            search=recognizer.config.search, endpoint=recognizer.config.endpoint,
            endpoint_limits=context.config.endpoint_limits())
    except ConfigError as e:
        return error(400, str(e), "bad_request")
    limit = context.config.max_upload_bytes
    if int(request.headers.get("content-length") or 0) > limit + FORM_SLACK:
        return error(413, f"upload is over the limit of {limit} bytes", "too_big",
                     "Payload Too Large")
    context.admit("http")
    body = _Body(request.receive, context.config.idle_timeout_seconds, limit)
    try:
        try:
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                form = await Request(request.scope, body).form(max_files=1, max_fields=16)
                files = [v for v in form.values() if not isinstance(v, str)]
                if not files:
                    raise UploadError("the form has no file part")
                data = await files[0].read()
            elif request.headers.get("content-type", "").startswith("application/json"):
                raise UploadError("a URL to fetch is not supported: send the audio itself")
            else:
                data = await _read_body(body)
            if len(data) > limit:
                raise UploadError(f"upload is over the limit of {limit} bytes")
            rate, samples = await run_in_threadpool(_samples, data, options, raw,
                                                    context.config.max_stream_seconds)
        except UploadError as e:
            if body.failure is not None:
                status, message, kind = body.failure
                return error(status, message, kind, "Request Timeout" if status == 408
                             else "Payload Too Large")
            return error(400, str(e), "bad_request")
        except Exception as e:  # a malformed multipart form
            if body.failure is not None:
                return error(*body.failure)
            return error(400, f"unreadable body ({e})", "bad_request")
        try:
            await context.engine.prepare(options.search, options.hotwords, None)
            live = context.engine.open(search=options.search, hotwords=options.hotwords,
                                       endpoint=options.endpoint)
        except StreamdecError as e:  # hotwords the model cannot spell
            return error(400, str(e), "bad_request")
        pieces = ((rate, samples[i:i + rate]) for i in range(0, len(samples), rate))
        try:
            finals = [r for r in await run_stream(live, pieces) if r.is_final]
        except DecodeError as e:
            return error(500, str(e), "decode_failed", "Internal Server Error")
        level = options.text_format or context.config.text_format
        try:
            finals = await run_in_threadpool(
                lambda: [default_formatter().apply(r, level) for r in finals])
        except StreamdecError as e:
            return error(500, f"formatting: {e}", "format_failed", "Internal Server Error")
        context.metrics.audio.inc(len(samples) / rate)
        return JSONResponse(prerecorded_response(
            finals, len(samples) / rate, hashlib.sha256(data).hexdigest(), settings.model,
            utterances, request_id))
    finally:
        context.release("http")


def _samples(data: bytes, options, raw: bool, max_seconds: float) -> tuple[int, np.ndarray]:
    """(rate, mono samples) of the body: a file, or raw audio as the query says."""
    if not raw:
        return read_upload(data, max_seconds)
    try:
        samples = decode_pcm(data, options.encoding, options.channels)
    except AudioInputError as e:
        raise UploadError(str(e)) from None
    samples = samples.reshape(-1, options.channels).mean(axis=1).astype(np.float32)
    if not len(samples):
        raise UploadError("the body holds no audio samples")
    if len(samples) / options.sample_rate > max_seconds:
        raise UploadError(f"the body holds over {max_seconds:g} s of audio (the limit)")
    return options.sample_rate, samples
