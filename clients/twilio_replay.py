#!/usr/bin/env python3
"""Replay an audio file as Twilio Media Streams would send a call (``<Start><Stream>``).

    python clients/twilio_replay.py call.wav                     # ws://127.0.0.1:6006/twilio
    python clients/twilio_replay.py stereo-call.wav --realtime   # both_tracks, paced live
    python clients/twilio_replay.py call.wav --url wss://example.com/twilio --no-subscribe

Sends what Twilio sends: ``connected``, ``start`` (callSid, streamSid, tracks,
mediaFormat audio/x-mulaw 8000 Hz), then ``media`` messages of 20 ms of base64 mu-law with
``track``, ``chunk`` and ``timestamp``, and ``stop``. A stereo file is a ``both_tracks``
stream: channel 0 is the ``inbound`` track, channel 1 ``outbound``, each in its own media
messages. ``--param text_format=punct`` adds a ``customParameters`` entry (TwiML
``<Parameter>``; the server reads its endpoint rules and ``text_format`` there). ``--dtmf 5@1.0`` sends a ``dtmf`` message after 1 s of audio. The results are
read from the server's ``/calls/{callSid}`` (joined before the call starts) and printed.
``--twilio-auth-token-file F`` signs the handshake as Twilio does (``X-Twilio-Signature``:
base64 HMAC-SHA1 of the URL, keyed with the auth token in F) and sends no bearer token on
it (``--token`` still authorises the ``/calls`` subscription).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import secrets

import websockets

from call_common import (add_call_args, joined, mulaw_encode, paced, read_call,
                         replay_connect_kwargs)

RATE = 8000
TRACKS = ("inbound", "outbound")


def twilio_messages(pcm, call_id: str, stream_sid: str, frame_ms: int = 20,
                    dtmf: dict[int, str] | None = None, custom: dict[str, str] | None = None):
    """(frame number, message) of the whole stream, in order (``pcm``: int16, frames x
    1 or 2 channels at 8 kHz; ``dtmf``: sample offset -> digit; ``custom``: the start's
    ``customParameters``)."""
    tracks = TRACKS[:pcm.shape[1]]
    seq = iter(range(1, 1 << 30))
    yield 0, {"event": "connected", "protocol": "Call", "version": "1.0.0"}
    yield 0, {"event": "start", "sequenceNumber": str(next(seq)), "streamSid": stream_sid,
              "start": {"streamSid": stream_sid, "accountSid": "AC" + "0" * 32,
                        "callSid": call_id, "tracks": list(tracks),
                        "customParameters": dict(custom or {}),
                        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE,
                                        "channels": 1}}}
    size = RATE * frame_ms // 1000
    pending = dict(sorted((dtmf or {}).items()))
    for chunk, i in enumerate(range(0, len(pcm), size), start=1):
        for at in [a for a in pending if a <= i]:
            yield chunk - 1, {"event": "dtmf", "streamSid": stream_sid,
                      "sequenceNumber": str(next(seq)),
                      "dtmf": {"track": "inbound_track", "digit": pending.pop(at)}}
        for c, track in enumerate(tracks):
            payload = base64.b64encode(mulaw_encode(pcm[i:i + size, c])).decode()
            yield chunk - 1, {"event": "media", "sequenceNumber": str(next(seq)),
                      "streamSid": stream_sid,
                      "media": {"track": track, "chunk": str(chunk),
                                "timestamp": str(i * 1000 // RATE), "payload": payload}}
    yield -(-len(pcm) // size), {"event": "stop", "sequenceNumber": str(next(seq)),
                     "streamSid": stream_sid,
                     "stop": {"accountSid": "AC" + "0" * 32, "callSid": call_id}}


def twilio_handshake_kwargs(args: argparse.Namespace) -> dict:
    """``websockets.connect`` options of the stream's socket: as the other clients', or, with
    a Twilio auth token, Twilio's signature of the URL in place of the bearer token."""
    kwargs = replay_connect_kwargs(args)
    token_file = getattr(args, "twilio_auth_token_file", None)
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            token = next(line.strip() for line in f if line.strip() and not line.startswith("#"))
        mac = hmac.new(token.encode(), args.url.encode(), hashlib.sha1).digest()
        kwargs["additional_headers"] = {"X-Twilio-Signature": base64.b64encode(mac).decode()}
    return kwargs


async def main(args: argparse.Namespace) -> list:
    pcm = read_call(args.file, RATE)
    if pcm.shape[1] > 2:
        raise SystemExit(f"{args.file}: {pcm.shape[1]} channels; Twilio has 1 or 2 tracks")
    call_id = args.call_id or "CA" + secrets.token_hex(16)
    dtmf = {}
    for spec in args.dtmf:
        digit, _, at = spec.partition("@")
        dtmf[int(float(at or 0) * RATE)] = digit
    out: list = []
    reader = None if args.no_subscribe else await joined(args.url, call_id, args, out)
    custom = dict(p.partition("=")[::2] for p in args.param)
    messages = list(twilio_messages(pcm, call_id, "MZ" + secrets.token_hex(16), args.frame_ms,
                                    dtmf, custom))
    frames: dict[int, list] = {}
    for n, message in messages:
        frames.setdefault(n, []).append(message)
    async with websockets.connect(args.url, **twilio_handshake_kwargs(args)) as ws:
        async for n in paced(max(frames) + 1, args.frame_ms, args.realtime):
            for message in frames.get(n, []):
                await ws.send(json.dumps(message))
    if reader is not None:
        await reader
    return out


if __name__ == "__main__":
    from common import add_connection_args

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_call_args(p)
    add_connection_args(p, "ws://127.0.0.1:6006/twilio")
    p.add_argument("--frame-ms", type=int, default=20, help="audio per media message")
    p.add_argument("--dtmf", action="append", default=[], metavar="DIGIT@SECONDS",
                   help="send a dtmf message at this point of the audio (may repeat)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a customParameters entry, as TwiML <Parameter> sets (may repeat)")
    p.add_argument("--twilio-auth-token-file", metavar="FILE",
                   help="sign the handshake with this Twilio auth token, as Twilio does")
    p.add_argument("--no-subscribe", action="store_true",
                   help="do not read the results from /calls/{callSid}")
    asyncio.run(main(p.parse_args()))
