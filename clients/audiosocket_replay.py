#!/usr/bin/env python3
"""Replay an audio file as Asterisk's AudioSocket would send a call (plain TCP).

    python clients/audiosocket_replay.py call.wav                 # 127.0.0.1:9092
    python clients/audiosocket_replay.py call.wav --host pbx-asr --port 9092 --realtime
    python clients/audiosocket_replay.py call.wav --rate 16000    # frame type 0x12

Sends what ``AudioSocket(<uuid>,<host>:<port>)`` sends: the UUID frame (type 0x01, 16
bytes), then 20 ms audio frames (type 0x10: signed 16-bit little-endian PCM, 8 kHz mono;
``--rate`` picks the higher-rate types 0x11-0x18 of newer Asterisk), ``--dtmf 5@1.0`` a
DTMF frame (0x03) after 1 s of audio, and the hangup frame (0x00) at the end. A stereo
file is two AudioSockets, one per channel (as Asterisk runs one per channel), each its
own call (UUID). The results are read from the streamdec server's ``/calls/{uuid}``
(``--url``: its WebSocket address) and printed.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from call_common import add_call_args, joined, paced, read_call

#: frame type -> sample rate (Asterisk's res_audiosocket)
AUDIO_TYPES = {8000: 0x10, 12000: 0x11, 16000: 0x12, 24000: 0x13, 32000: 0x14, 44100: 0x15,
               48000: 0x16, 96000: 0x17, 192000: 0x18}


def frame(kind: int, payload: bytes = b"") -> bytes:
    """type (1 byte), payload length (2 bytes, big-endian), payload."""
    return bytes([kind]) + len(payload).to_bytes(2, "big") + payload


def audiosocket_frames(pcm, call_id: uuid.UUID, rate: int, frame_ms: int = 20,
                       dtmf: dict[int, str] | None = None) -> list[list[bytes]]:
    """The frames of one call, grouped per ``frame_ms`` (``pcm``: int16 mono)."""
    size = rate * frame_ms // 1000
    groups = [[frame(0x01, call_id.bytes)]]
    pending = dict(sorted((dtmf or {}).items()))
    for i in range(0, len(pcm), size):
        group = [frame(0x03, pending.pop(at).encode()) for at in list(pending) if at <= i]
        group.append(frame(AUDIO_TYPES[rate], pcm[i:i + size].astype("<i2").tobytes()))
        groups.append(group)
    groups.append([frame(0x00)])
    return groups


async def send_call(host: str, port: int, groups: list[list[bytes]], frame_ms: int,
                    realtime: bool) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        async for n in paced(len(groups), frame_ms, realtime):
            writer.write(b"".join(groups[n]))
            await writer.drain()
        await reader.read()  # the server closes after the hangup
    finally:
        writer.close()


async def main(args: argparse.Namespace) -> list:
    if args.rate not in AUDIO_TYPES:
        raise SystemExit(f"--rate must be one of {', '.join(map(str, AUDIO_TYPES))}")
    pcm = read_call(args.file, args.rate)
    base = uuid.UUID(args.call_id) if args.call_id else uuid.uuid4()
    ids = [base] + [uuid.uuid4() for _ in range(pcm.shape[1] - 1)]
    dtmf = {}
    for spec in args.dtmf:
        digit, _, at = spec.partition("@")
        dtmf[int(float(at or 0) * args.rate)] = digit
    out: list = []
    readers = []
    for call_id in ids:
        if not args.no_subscribe:
            readers.append(await joined(args.url, str(call_id), args, out))
    await asyncio.gather(*[
        send_call(args.host, args.port,
                  audiosocket_frames(pcm[:, c], ids[c], args.rate, args.frame_ms,
                                     dtmf if c == 0 else None), args.frame_ms, args.realtime)
        for c in range(pcm.shape[1])])
    await asyncio.gather(*readers)
    return out


if __name__ == "__main__":
    from common import add_connection_args

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_call_args(p)
    p.add_argument("--host", default="127.0.0.1", help="AudioSocket server address")
    p.add_argument("--port", type=int, default=9092, help="AudioSocket server port")
    p.add_argument("--rate", type=int, default=8000, help="sample rate sent (8000: type 0x10)")
    p.add_argument("--frame-ms", type=int, default=20, help="audio per frame")
    p.add_argument("--dtmf", action="append", default=[], metavar="DIGIT@SECONDS",
                   help="send a DTMF frame at this point of the audio (may repeat)")
    add_connection_args(p, "ws://127.0.0.1:6006")  # the server's WebSocket port: /calls
    p.add_argument("--no-subscribe", action="store_true",
                   help="do not read the results from /calls/{uuid}")
    asyncio.run(main(p.parse_args()))
