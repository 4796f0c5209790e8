#!/usr/bin/env python3
"""Stream an audio file with AssemblyAI's own Python SDK (``pip install assemblyai``) to
streamdec's ``/v3/ws``: the SDK's streaming client as AssemblyAI documents it, with only
the host and the key changed (the key is one of the server's tokens, or anything when the
server has none).

    python clients/assemblyai_live.py call.wav                  # ws://127.0.0.1:6006
    python clients/assemblyai_live.py call.wav --url ws://10.0.0.5:6006 --key TOKEN

Prints each turn's transcript at its end with its word times (seconds), then the audio
duration of the ``Termination`` message.
"""

from __future__ import annotations

import argparse

import soundfile as sf
from assemblyai.streaming.v3 import (StreamingClient, StreamingClientOptions,
                                     StreamingEvents, StreamingParameters)

errors: list = []


def on_turn(client, turn) -> None:
    if turn.end_of_turn and not turn.turn_is_formatted:
        words = " ".join(f"{w.text}@{w.start / 1000:.2f}" for w in turn.words)
        print(f"{turn.transcript}    [{words}]", flush=True)


def on_termination(client, event) -> None:
    print(f"({event.audio_duration_seconds} s of audio)", flush=True)


def on_error(client, error) -> None:
    errors.append(error)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--url", default="ws://127.0.0.1:6006",
                   help="the server: ws://HOST:PORT, or wss:// behind TLS")
    p.add_argument("--key", default="streamdec", help="a server token (AssemblyAI's API key)")
    args = p.parse_args()
    audio, rate = sf.read(args.file, dtype="int16", always_2d=True)
    pcm = audio.mean(axis=1).round().astype("<i2").tobytes()

    # the one change from AssemblyAI's own example: where the server is (api_host takes
    # a ws:// or wss:// URL as well as a host name); the wait for the last turn is longer
    # than the SDK's 5 s, for audio sent faster than real time
    client = StreamingClient(StreamingClientOptions(api_key=args.key, api_host=args.url,
                                                    terminate_timeout=120))
    client.on(StreamingEvents.Turn, on_turn)
    client.on(StreamingEvents.Termination, on_termination)
    client.on(StreamingEvents.Error, on_error)
    client.connect(StreamingParameters(sample_rate=rate, encoding="pcm_s16le"))
    step = rate // 10 * 2  # 100 ms messages
    client.stream(pcm[start:start + step] for start in range(0, len(pcm), step))
    client.disconnect(terminate=True)
    if errors:
        raise SystemExit(f"server: {errors[0]} (code {errors[0].code})")


if __name__ == "__main__":
    main()
