"""The sherpa-onnx streaming protocol (served at ``/`` and ``/sherpa``).

Client -> server: binary messages of little-endian float32 samples in [-1, 1] (by default;
see ``options``), the text ``Done`` to end the input, the text ``Finalize`` to end the
current utterance now (force-final: all the audio sent so far is decoded, the last chunk
padded with silence, then the segment's final is sent at once, with empty text when it
has none, and the next audio opens a new segment where that audio ended).
Server -> client: after each decoded chunk that changed the text (or its stable part),
and at each endpoint, the open segment as JSON with the fields in
sherpa-onnx's order (``sherpa_message``) and one more at the end, ``stable``: how many
leading characters of ``text`` will not change any more; after ``Done`` the last result
with ``is_final`` and ``is_eof`` true, then the text ``Done!``; the server then closes.
With ``channels=2`` every message also has ``"channel"``, and ``Done!`` follows the last
result of both channels. Finals of a connection with ``text_format`` ``punct``/``full``
also have ``display`` and ``display_words`` (``display.py``), after sherpa-onnx's fields.
"""

from __future__ import annotations

import asyncio
import json

from ..errors import DecodeError
from ..results import Result
from .connection import DRAIN, ClientError, Connection, Disconnected
from .display import connection_text_format, display_fields, formatted

__all__ = ["sherpa_message", "trailing_blanks", "run_sherpa", "DONE", "DONE_REPLY", "FINALIZE"]

DONE = "Done"
DONE_REPLY = "Done!"
FINALIZE = "Finalize"


def trailing_blanks(result: Result, frame_seconds: float) -> int:
    """Encoder frames decoded in the segment after its last token (all of them when it has
    none)."""
    if result.timestamps:
        last = result.start_time + result.timestamps[-1]
        return max(0, round((result.end_time - last) / frame_seconds) - 1)
    return max(0, round((result.end_time - result.start_time) / frame_seconds))


def sherpa_message(result: Result, frame_seconds: float, channel: int | None = None) -> str:
    """One result as sherpa-onnx's server writes it (its fields, in its order).
    Tokens show the word-boundary unit ``\u2581`` as a space, as sherpa-onnx does;
    ``lm_probs`` / ``context_scores`` / ``words`` are empty (no LM, no lexicon)."""
    message = {
        "text": result.text.lstrip(),
        "tokens": [t.replace("\u2581", " ") for t in result.tokens],
        "timestamps": [round(t, 2) for t in result.timestamps],
        "ys_probs": [round(p, 6) for p in result.log_probs],
        "lm_probs": [],
        "context_scores": [],
        "segment": result.segment,
        "words": [],
        "num_trailing_blanks": trailing_blanks(result, frame_seconds),
        "start_time": round(result.start_time, 2),
        "is_final": result.is_final,
        "is_eof": result.is_eof,
        "stable": result.stable_chars,  # not sherpa-onnx's: its clients ignore it
    }
    if channel is not None:
        message["channel"] = channel
    message.update(display_fields([result]))
    return json.dumps(message, ensure_ascii=False)


async def _send_results(conn: Connection, channel: int, frame_seconds: float) -> None:
    tag = channel if len(conn.lives) > 1 else None
    level = connection_text_format(conn)
    try:
        async for result in conn.lives[channel].results():
            result = await formatted(result, level)
            await conn.send(sherpa_message(result, frame_seconds, tag))
    except DecodeError as e:
        raise ClientError("decode_failed", str(e)) from None


async def _read(conn: Connection) -> None:
    """Audio until ``Done``; audio after it is an error. After the drain (the server
    shutting down) the client's audio is ignored: its results are on their way."""
    draining = False
    while True:
        message = await conn.receive()
        if message is DRAIN:
            draining = True
            conn.finish()
        elif isinstance(message, bytes):
            if draining:
                continue
            if conn.finished:
                raise ClientError("bad_message", "audio after Done")
            await conn.feed(message)
        elif message == DONE:
            conn.finish()
        elif message == FINALIZE:
            await _finalize(conn, draining)
        else:
            raise ClientError("bad_message", f"expected audio (binary) or the text {DONE!r} "
                                             f"or {FINALIZE!r}, got text {message[:40]!r}")


async def _finalize(conn: Connection, draining: bool) -> None:
    """``Finalize``: the open utterance of every channel ends now (ignored while draining:
    the last finals are on their way)."""
    if draining:
        return
    if conn.finished:
        raise ClientError("bad_message", f"{FINALIZE} after {DONE}")
    if any(live.stream.state.vad is not None for live in conn.lives):
        raise ClientError("bad_message", f"{FINALIZE} is not available with vad=true: the "
                                         "voice activity detector's silence ends utterances")
    await conn.force_final()


async def run_sherpa(conn: Connection) -> None:
    """Serve one sherpa-onnx client until its ``Done!`` (or an error, or it leaves)."""
    frame_seconds = conn.context.engine.recognizer.meta.encoder_frame_seconds
    sending = asyncio.ensure_future(asyncio.gather(
        *[_send_results(conn, c, frame_seconds) for c in range(len(conn.lives))]))
    reading = asyncio.ensure_future(_read(conn))
    try:
        await asyncio.wait({sending, reading}, return_when=asyncio.FIRST_COMPLETED)
        if reading.done() and not sending.done():
            error = reading.exception()
            if isinstance(error, ClientError) and error.after_results:
                conn.finish()
                await sending  # the results of the audio sent so far, then the error
                await conn.fail(error)
                return
            if isinstance(error, ClientError):
                await conn.fail(error)
                return
            if error is not None and not isinstance(error, Disconnected):
                raise error
            return  # the client left: its streams are dropped
        error = sending.exception()
        if isinstance(error, ClientError):
            await conn.fail(error)
        elif isinstance(error, Disconnected):
            return
        elif error is not None:
            raise error
        else:
            await conn.send(DONE_REPLY)
            await conn.close(1000, "done")
    except Disconnected:
        return
    finally:
        for task in (sending, reading):
            task.cancel()
        await asyncio.gather(sending, reading, return_exceptions=True)
