#!/usr/bin/env python3
"""Replay an audio file as FreeSWITCH's mod_audio_fork would send a call.

    python clients/audiofork_replay.py call.wav                  # ws://127.0.0.1:6006/audiofork
    python clients/audiofork_replay.py stereo-call.wav --rate 16000 --realtime

Sends what ``uuid_audio_fork <uuid> start <url> <mix-type> <rate> <metadata>`` sends: the
WebSocket subprotocol ``audio.drachtio.org``, one text frame of JSON metadata (with the
call's id as ``callSid``, and ``mixType`` / ``sampleRate``), then binary frames of 20 ms
of L16 (signed 16-bit little-endian PCM) at 8 or 16 kHz: ``mono`` for a mono file,
``stereo`` (caller and callee interleaved) for a stereo one; then closes, as ``stop``
does. The results are read from the server's ``/calls/{callSid}`` and printed (with
``--no-subscribe``: the ``transcription`` text frames the server sends back on the fork's
socket, which end when the socket closes; ``--linger`` keeps it open a while).
``--param text_format=punct`` adds a metadata key (the server reads the call's endpoint
rules and ``text_format`` there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import websockets

from call_common import (add_call_args, joined, paced, print_message, read_call,
                         replay_connect_kwargs)

SUBPROTOCOL = "audio.drachtio.org"


async def main(args: argparse.Namespace) -> tuple[list, list]:
    """(the messages of /calls/{id}, the text frames the server sent on the fork's socket)."""
    pcm = read_call(args.file, args.rate)
    if pcm.shape[1] > 2:
        raise SystemExit(f"{args.file}: {pcm.shape[1]} channels; mono or stereo only")
    mix = "stereo" if pcm.shape[1] == 2 else "mono"
    call_id = args.call_id or str(uuid.uuid4())
    metadata = {"callSid": call_id, "mixType": mix, "sampleRate": args.rate}
    for param in args.param:  # a JSON value when it is one (0.4), else the text
        name, _, value = param.partition("=")
        try:
            metadata[name] = json.loads(value)
        except ValueError:
            metadata[name] = value
    size = args.rate * args.frame_ms // 1000
    out: list = []
    replies: list = []
    reader = None if args.no_subscribe else await joined(args.url, call_id, args, out)
    async with websockets.connect(args.url, subprotocols=[SUBPROTOCOL],
                                  **replay_connect_kwargs(args)) as ws:
        async def read() -> None:
            try:
                async for text in ws:
                    replies.append(json.loads(text))
                    if args.no_subscribe:  # else the same results come from /calls
                        print_message(replies[-1].get("data", {}), args.json)
            except websockets.ConnectionClosed:
                pass

        replying = asyncio.ensure_future(read())
        await ws.send(json.dumps(metadata))
        async for n in paced(-(-len(pcm) // size), args.frame_ms, args.realtime):
            await ws.send(pcm[n * size:(n + 1) * size].astype("<i2").tobytes())
        if args.linger:  # the results of the last words, back on this socket
            await asyncio.sleep(args.linger)
        await ws.close()  # as ``uuid_audio_fork <uuid> stop`` does
        await replying
    if reader is not None:
        await reader
    return out, replies


if __name__ == "__main__":
    from common import add_connection_args

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_call_args(p)
    add_connection_args(p, "ws://127.0.0.1:6006/audiofork")
    p.add_argument("--rate", type=int, choices=(8000, 16000), default=8000,
                   help="sampling rate sent (8k or 16k)")
    p.add_argument("--frame-ms", type=int, default=20, help="audio per frame")
    p.add_argument("--linger", type=float, default=0.0,
                   help="seconds to keep the socket open after the audio")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a metadata key (e.g. text_format=punct, rule2_min_trailing_silence=0.4;"
                        " may repeat)")
    p.add_argument("--no-subscribe", action="store_true",
                   help="do not read the results from /calls/{callSid}")
    asyncio.run(main(p.parse_args()))
