"""What the call replay clients share: a WAV as a telephony platform would send it, pacing,
G.711 mu-law encoding, and printing a call's results (from ``/calls/{id}`` or an audio
fork's socket).

Needs ``websockets``, ``numpy``, ``soundfile`` and ``soxr`` (a file at another rate is
resampled to the platform's rate), all installed with ``pip install 'streamdec[server]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import AsyncIterator

import numpy as np
import websockets

from common import connect_kwargs, read_file

__all__ = ["read_call", "mulaw_encode", "paced", "print_message", "subscribe",
           "add_call_args", "calls_url", "joined"]


def read_call(path: str, rate: int) -> np.ndarray:
    """The file as int16 samples (frames x channels) at ``rate``."""
    audio, file_rate = read_file(path, dtype="int16")
    if file_rate != rate:
        import soxr

        audio = soxr.resample(audio.astype(np.float32) / 32768, file_rate, rate)
        audio = np.clip(np.round(audio * 32768), -32768, 32767).astype(np.int16)
    return np.ascontiguousarray(audio.reshape(len(audio), -1))


def mulaw_encode(pcm: np.ndarray) -> bytes:
    """int16 samples -> G.711 mu-law bytes (bias 0x84, magnitude clipped at 32635, bits
    inverted), the encoding of Twilio's ``audio/x-mulaw``."""
    x = pcm.astype(np.int32)
    sign = np.where(x < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(x), 32635) + 0x84
    exponent = np.floor(np.log2(magnitude)).astype(np.int32) - 7
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


async def paced(count: int, frame_ms: int, realtime: bool) -> AsyncIterator[int]:
    """Frame numbers 0 .. count-1; each one ``frame_ms`` after the last when ``realtime``
    (paced like a live call), else at once."""
    start = time.monotonic()
    for n in range(count):
        if realtime:
            await asyncio.sleep(max(0.0, start + n * frame_ms / 1000 - time.monotonic()))
        yield n


def print_message(message: dict, show_json: bool, partials: bool = False) -> None:
    """One message of a call, for people (or as it came with ``show_json``)."""
    if show_json:
        print(json.dumps(message, ensure_ascii=False), flush=True)
        return
    kind = message.get("type")
    if kind == "result" and (message["is_final"] or partials) and message["text"]:
        mark = "" if message["is_final"] else "~ "
        print(f"[{message['call_id']} {message['leg']} {message['start_time']:7.2f}] "
              f"{mark}{message['text']}", flush=True)
    elif kind == "dtmf":
        print(f"[{message['call_id']} dtmf {message.get('time', 0):7.2f}] {message['digit']}",
              flush=True)
    elif kind == "call_end" and "error" in message:
        print(f"[{message['call_id']}] ended: {message['kind']}: {message['error']}",
              flush=True)


def calls_url(url: str, call_id: str) -> str:
    """The ``/calls/{call_id}`` URL of the server at ``url`` (ws:// or wss://)."""
    from urllib.parse import quote, urlsplit

    parts = urlsplit(url)
    scheme = "wss" if parts.scheme in ("wss", "https") else "ws"
    return f"{scheme}://{parts.netloc}/calls/{quote(call_id, safe='')}"


async def subscribe(url: str, args: argparse.Namespace, ready: asyncio.Event,
                    out: list) -> None:
    """Read ``/calls/{id}`` until the call ends, printing (and keeping) each message."""
    async with websockets.connect(url, **connect_kwargs(args)) as ws:
        ready.set()
        async for text in ws:
            message = json.loads(text)
            out.append(message)
            print_message(message, args.json, args.partials)


async def joined(url: str, call_id: str, args: argparse.Namespace, out: list) -> asyncio.Future:
    """Start reading the call's ``/calls/{id}`` (``subscribe``) and return once it is joined
    (or has failed): the task, to await after the call."""
    ready = asyncio.Event()
    reader = asyncio.ensure_future(subscribe(calls_url(url, call_id), args, ready, out))
    await asyncio.wait({reader, asyncio.ensure_future(ready.wait())},
                       return_when=asyncio.FIRST_COMPLETED)
    return reader


def replay_connect_kwargs(args: argparse.Namespace) -> dict:
    """``connect_kwargs`` for the platform's socket, whose close waits for the server's
    answer without a time limit: the server answers once it has read every frame before
    the close, which under back-pressure (a replay faster than real time) can take longer
    than websockets' default 10 s, after which the connection would be dropped with audio
    still unread."""
    return {**connect_kwargs(args), "close_timeout": None}


def add_call_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="audio file (WAV, FLAC, ...); stereo: two legs")
    p.add_argument("--realtime", action="store_true",
                   help="pace frames like a live call (default: as fast as possible)")
    p.add_argument("--json", action="store_true", help="print every message as JSON")
    p.add_argument("--partials", action="store_true", help="print partial results too")
    p.add_argument("--call-id", help="the call's id (default: a new one)")
