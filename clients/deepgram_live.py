#!/usr/bin/env python3
"""Stream an audio file with Deepgram's own Python SDK (``pip install deepgram-sdk``) to
streamdec's ``/v1/listen``: the SDK's code as Deepgram documents it, with only the base
URL and the key changed (the key is one of the server's tokens, or anything when the
server has none).

    python clients/deepgram_live.py call.wav                    # http://127.0.0.1:6006
    python clients/deepgram_live.py call.wav --url http://10.0.0.5:6006 --key TOKEN

Prints each final's transcript with its word times, then the Metadata's duration.
"""

from __future__ import annotations

import argparse
import threading

import soundfile as sf
from deepgram import DeepgramClient
from deepgram.core.events import EventType
from deepgram.environment import DeepgramClientEnvironment


def show(message) -> None:
    if message.type == "Results" and message.is_final:
        alternative = message.channel.alternatives[0]
        if alternative.transcript:
            words = " ".join(f"{w.word}@{w.start:.2f}" for w in alternative.words)
            print(f"{alternative.transcript}    [{words}]", flush=True)
    elif message.type == "Metadata":
        print(f"({message.duration:.2f} s of audio)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--url", default="http://127.0.0.1:6006", help="the server's base URL")
    p.add_argument("--key", default="streamdec", help="a server token (Deepgram's API key)")
    args = p.parse_args()
    audio, rate = sf.read(args.file, dtype="int16", always_2d=True)
    pcm = audio.mean(axis=1).round().astype("<i2").tobytes()

    # the one change from Deepgram's own example: where the server is
    host = args.url.split("://", 1)[1]
    ws = ("wss://" if args.url.startswith("https") else "ws://") + host
    environment = DeepgramClientEnvironment(base=args.url, production=ws, agent=ws,
                                            agent_rest=args.url)
    client = DeepgramClient(api_key=args.key, environment=environment)

    with client.listen.v1.connect(model="nova-3", encoding="linear16",
                                  sample_rate=rate) as socket:
        socket.on(EventType.MESSAGE, show)
        listener = threading.Thread(target=socket.start_listening)
        listener.start()
        step = rate // 10 * 2  # 100 ms messages
        for start in range(0, len(pcm), step):
            socket.send_media(pcm[start:start + step])
        socket.send_close_stream()
        listener.join()


if __name__ == "__main__":
    main()
