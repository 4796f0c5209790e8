"""``POST /v1/audio/transcriptions``: the OpenAI-compatible file transcription endpoint.

A multipart form with ``file`` (any format soundfile reads) and optionally
``response_format`` (``json`` | ``text`` | ``srt`` | ``vtt`` | ``verbose_json``);
``model``, ``language``, ``prompt``, ``temperature`` and ``timestamp_granularities[]`` are
accepted and ignored (the server has one model; ``verbose_json`` always has word times).
streamdec's own fields: the endpoint rules ``ruleN_min_trailing_silence`` /
``ruleN_min_utterance_length`` (``endpointing``), where the file's segments end.
``text_format`` (``raw`` | ``punct`` | ``full``, default the server's
``transcription_text_format``, ``full``) chooses the text for people: every format then
shows the formatted text and words (``streamdec.textfmt``). ``second_pass`` (``true`` |
``false``): the file's finals decoded again by the server's second pass (on by default
where the server has one; ``true`` on a server without one: 400). ``keywords`` (keyword
lines with ``/`` between them, ``streamdec.search.keyword_graph``): spotted beside the
transcript, the keywords heard listed in ``verbose_json``'s ``keywords`` (the only format
with them: with another, 400; a list the model cannot spell: 400 naming the line).
The audio is decoded by the engine like any live stream, batched with them.

``render`` (pure) makes each format's body from the final results.

The body is read with two limits as it arrives (``_Body``): more than ``max_upload_bytes``
(and the form's own few bytes) is refused with 413 at once, not once the whole body has
been spooled to disk (a chunked body has no Content-Length to refuse it by); no bytes for
``idle_timeout_seconds`` is answered 408 (a body that stops mid-way held the request for
good). Both close the connection.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
from typing import Sequence

import numpy as np

from ..core.endpoint import EndpointConfig
from ..core.results import KeywordEvent, Result
from ..engine import run_stream
from ..errors import ConfigError, DecodeError, StreamdecError, TokenizeError, UploadError
from ..files.codec_stderr import codec_stderr_caught
from ..files.formats import shown_text, shown_words, subtitles, transcript
from ..search.keyword_graph import split_keywords
from ..textfmt import check_text_format, default_formatter
from ..validation import unknown_names
from .endpointing import ENDPOINT_KEYS, EndpointLimits, endpoint_config
from .redaction import redacted

__all__ = ["RESPONSE_FORMATS", "render", "read_form", "read_upload", "UploadError"]

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
_MEDIA = {"json": "application/json", "verbose_json": "application/json",
          "text": "text/plain; charset=utf-8", "srt": "application/x-subrip; charset=utf-8",
          "vtt": "text/vtt; charset=utf-8"}
_FIELDS = ("file", "response_format", "model", "language", "prompt", "temperature",
           "timestamp_granularities[]", "timestamp_granularities", "text_format",
           "second_pass", "keywords") + ENDPOINT_KEYS


def read_upload(data: bytes, max_seconds: float = math.inf) -> tuple[int, np.ndarray]:
    """Uploaded file bytes -> (sample rate, mono float32 samples); channels are averaged.
    UploadError for a file soundfile cannot read, one without samples, and one of more
    than ``max_seconds`` of audio (the server's ``max_stream_seconds``): refused by the
    length its header gives before anything is decoded, else once that much is read. The
    file is decoded a block at a time, its channels averaged as they come: a compressed
    file can hold a thousand times its size in samples (15 KB of FLAC: 10 minutes of
    silence), which reading it whole would hold at once, per channel."""
    import soundfile as sf

    try:
        with codec_stderr_caught():  # (an MP3 decoder's chatter: files.codec_stderr)
            f = sf.SoundFile(io.BytesIO(data))
        with f:
            rate, limit = int(f.samplerate), max_seconds * f.samplerate
            if limit < f.frames < _UNKNOWN_LENGTH:
                raise UploadError(f"file holds {f.frames / rate:g} s of audio, over the limit "
                                  f"of {max_seconds:g} s")
            pieces, frames = [], 0
            while True:
                with codec_stderr_caught():
                    block = f.read(_BLOCK_FRAMES, dtype="float32", always_2d=True)
                if not len(block):
                    break
                frames += len(block)
                if frames > limit:
                    raise UploadError(f"file holds over {max_seconds:g} s of audio (the limit)")
                pieces.append(block.mean(axis=1))
    except UploadError:
        raise
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError / TypeError
        raise UploadError(f"file is not a readable audio file ({e})") from None
    if frames == 0:
        raise UploadError("file holds no audio samples")
    return rate, np.ascontiguousarray(np.concatenate(pieces), dtype=np.float32)


_BLOCK_FRAMES = 1 << 16  # frames decoded at a time
_UNKNOWN_LENGTH = 1 << 62  # a frame count this large is libsndfile's "length unknown"


def _segment(n: int, r: Result) -> dict:
    start, end = r.span
    return {"id": n, "start": round(start, 3), "end": round(end, 3), "text": shown_text(r),
            "tokens": list(r.token_ids),
            "avg_logprob": round(float(np.mean(r.log_probs)), 6) if r.log_probs else 0.0,
            "words": [{"word": w.text, "start": w.start, "end": w.end, "probability": w.conf}
                      for w in shown_words(r)]}


def render(finals: Sequence[Result], fmt: str, duration: float,
           language: str | None = None,
           keywords: Sequence[KeywordEvent] | None = None) -> tuple[str, str]:
    """(body, media type) of a transcription in ``fmt``; ``keywords``: the keywords heard
    (``verbose_json`` only: its ``keywords``, each with ``keyword``, ``start``, ``end``,
    ``score`` and ``tokens``; None: not asked, no ``keywords``)."""
    text = transcript(finals)
    if fmt == "json":
        body = json.dumps({"text": text}, ensure_ascii=False)
    elif fmt == "text":
        body = text + "\n"
    elif fmt in ("srt", "vtt"):
        body = subtitles(finals, fmt)
    elif fmt == "verbose_json":
        segments = [_segment(n, r) for n, r in enumerate(r for r in finals if r.text)]
        out = {"task": "transcribe", "language": language or "unknown",
               "duration": round(duration, 3), "text": text, "segments": segments,
               "words": [{k: w[k] for k in ("word", "start", "end")}
                         for s in segments for w in s["words"]]}
        if keywords is not None:
            out["keywords"] = [{"keyword": k.keyword, "start": round(k.start_time, 3),
                                "end": round(k.end_time, 3), "score": round(k.score, 4),
                                "tokens": list(k.tokens)} for k in keywords]
        body = json.dumps(out, ensure_ascii=False)
    else:
        raise UploadError(f"unsupported response_format {fmt!r}: one of "
                          f"{', '.join(RESPONSE_FORMATS)}")
    return body, _MEDIA[fmt]


#: the form's bytes beside the file (boundaries, headers, small fields) allowed over
#: ``max_upload_bytes``
FORM_SLACK = 64 * 1024


class _Body:
    """The request's ASGI ``receive``, as the form parser reads it, with its limits (module
    notes): ``failure`` is then (status, reason) and UploadError is raised."""

    def __init__(self, receive, idle: float, limit: int) -> None:
        self._receive, self.idle, self.limit = receive, idle, limit
        self.received = 0
        self.failure: tuple[int, str, str] | None = None

    def _fail(self, status: int, reason: str, kind: str) -> UploadError:
        self.failure = (status, reason, kind)
        return UploadError(reason)

    async def __call__(self) -> dict:
        try:
            message = await asyncio.wait_for(self._receive(), self.idle)
        except asyncio.TimeoutError:
            raise self._fail(408, f"no upload data for {self.idle:g} s", "timeout") from None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit + FORM_SLACK:
                raise self._fail(413, f"upload is over the limit of {self.limit} bytes",
                                 "too_big")
        return message


def check_fields(names) -> None:
    message = unknown_names(names, _FIELDS, "field")
    if message:
        raise UploadError(message)


async def transcribe_upload(context, request):
    """The endpoint: refusals (401/503), a bad request (400), too large a file (413)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    def error(status: int, message: str, kind: str) -> Response:
        context.metrics.errors.labels(kind).inc()
        headers = {"connection": "close"} if status in (408, 413) else None  # body unread
        return JSONResponse({"error": {"message": message, "type": kind}}, status, headers)

    refusal = context.refusal(request.headers, request.query_params)
    if refusal is not None:
        return JSONResponse({"error": {"message": refusal.reason, "type": "refused"}},
                            refusal.status)
    limit = context.config.max_upload_bytes
    if int(request.headers.get("content-length") or 0) > limit + FORM_SLACK:
        return error(413, f"upload is over the limit of {limit} bytes", "too_big")
    context.admit("http")
    body = _Body(request.receive, context.config.idle_timeout_seconds, limit)
    try:
        try:
            form = await Request(request.scope, body).form(max_files=1, max_fields=16)
        except Exception as e:  # not multipart, or a malformed one, or over a limit
            if body.failure is not None:
                return error(*body.failure)
            return error(400, f"expected a multipart/form-data body with 'file' ({e})",
                         "bad_request")
        try:
            upload, fmt, endpoint, level, second_pass, keywords = read_form(
                form, context.engine.recognizer.config.endpoint,
                context.config.endpoint_limits(), context.config.transcription_text_format)
            if second_pass and context.engine.recognizer.second_pass is None:
                raise UploadError("second_pass: true needs a server with a second pass "
                                  "(--config two-pass)")
            if keywords is not None:  # checked against the model, its graph built
                try:
                    await context.engine.prepare(keywords=keywords)
                except (ConfigError, TokenizeError) as e:
                    raise UploadError(str(e)) from None
            data = await upload.read()
            if len(data) > limit:
                return error(413, f"upload is over the limit of {limit} bytes", "too_big")
            rate, samples = await run_in_threadpool(read_upload, data,
                                                    context.config.max_stream_seconds)
        except UploadError as e:
            return error(400, str(e), "bad_request")
        try:
            finals, heard = await _transcribe(context.engine, rate, samples, endpoint,
                                              second_pass, keywords)
        except DecodeError as e:  # counted by the engine's observer
            return JSONResponse({"error": {"message": str(e), "type": "decode_failed"}}, 500)
        try:
            finals = await run_in_threadpool(
                lambda: [default_formatter().apply(r, level) for r in finals])
        except StreamdecError as e:
            return JSONResponse({"error": {"message": f"text_format {level}: {e}",
                                           "type": "format_failed"}}, 500)
        finals = [redacted(r, context.redaction) for r in finals]  # the server's rules
        body, media = render(finals, fmt, len(samples) / rate, form.get("language"),
                             None if keywords is None else heard)
        context.metrics.audio.inc(len(samples) / rate)
        return Response(body, media_type=media)
    finally:
        context.release("http")


def read_form(form, endpoint: EndpointConfig, limits: EndpointLimits, text_format: str):
    """What a request's parsed form asks (pure): its ``file`` part, the response format,
    the endpoint rules (None: the server's ``endpoint``, else changed within ``limits``),
    the text format (default ``text_format``), the second pass on/off (None: the server's
    default) and the keyword lines (None: none). UploadError for an unknown field, no
    file, or a value that is not one a field takes."""
    check_fields(form.keys())
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise UploadError("the form has no 'file' part")
    fmt = form.get("response_format") or "json"
    if fmt not in RESPONSE_FORMATS:
        raise UploadError(f"unsupported response_format {fmt!r}: one of "
                          f"{', '.join(RESPONSE_FORMATS)}")
    values = {key: form.get(key) for key in ENDPOINT_KEYS if key in form}
    level = form.get("text_format") or text_format
    try:
        rules = endpoint_config(values, endpoint, limits, text=True) if values else None
        check_text_format(level)
    except ConfigError as e:
        raise UploadError(str(e)) from None
    second_pass = form.get("second_pass")
    if second_pass is not None and second_pass not in ("true", "false"):
        raise UploadError(f"second_pass must be true or false, got {second_pass!r}")
    keywords = form.get("keywords")
    if keywords is not None:
        if not isinstance(keywords, str) or not keywords.strip(" /\n"):
            raise UploadError("keywords: no keyword given")
        if fmt != "verbose_json":
            raise UploadError(f"keywords: the keywords heard are listed in response_format "
                              f"verbose_json, got {fmt!r}")
        keywords = tuple(split_keywords(keywords))
    return (upload, fmt, rules, level, None if second_pass is None else second_pass == "true",
            keywords)


async def _transcribe(engine, rate: int, samples: np.ndarray, endpoint=None,
                      second_pass: bool | None = None, keywords: Sequence[str] | None = None
                      ) -> tuple[list[Result], list[KeywordEvent]]:
    """Final results of a whole file decoded by the engine (1 s pieces, back-pressured),
    with ``endpoint`` rules (None: the server's) and ``second_pass`` (None: the server's
    default), and the keywords heard (``keywords``: the lines spotted; None: none)."""
    pieces = ((rate, samples[i:i + rate]) for i in range(0, len(samples), rate))
    live = engine.open(endpoint=endpoint, second_pass=second_pass, keywords=keywords)
    events = await run_stream(live, pieces)
    return ([r for r in events if isinstance(r, Result) and r.is_final],
            [e for e in events if isinstance(e, KeywordEvent)])
