#!/usr/bin/env python3
"""Build the fuzz targets' seed corpus (``corpus/TARGET/``) from real traffic and files:
a spoken phrase (espeak-ng's voice, 0.3 s of it) sent as each platform's client in
``clients/`` sends it (``twilio_replay``'s messages, ``audiosocket_replay``'s frames,
``audiofork_replay``'s metadata and L16 frames, ``transcribe_http``'s multipart form, the
sherpa, Vosk, Deepgram, AssemblyAI and OpenAI Realtime clients' audio messages and control
texts), the shipped configs and catalog, the test fixtures' ``tokens.txt`` and encoder
exports (their metadata and state inputs), and model archives packed as the publishers
pack them.

    python bench/fuzz/make_corpus.py          # rewrites corpus/ (a few hundred KB)
    python bench/fuzz/make_corpus.py deepgram assemblyai   # only these targets' seeds

The seeds are fixed by this script and its inputs (the same bytes on every run, espeak-ng
aside); commit them with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "clients")]

from audiosocket_replay import audiosocket_frames  # noqa: E402
from call_common import mulaw_encode  # noqa: E402
from harness import encode_messages  # noqa: E402
from transcribe_http import multipart  # noqa: E402
from twilio_replay import twilio_messages  # noqa: E402

import fuzz_multipart  # noqa: E402
import fuzz_onnx_meta  # noqa: E402

CORPUS = HERE / "corpus"
PHRASE = "yes, call me at five"
LAYOUTS = REPO / "tests" / "fixtures" / "published-layouts"


def speech(rate: int, seconds: float = 0.3) -> np.ndarray:
    """int16 speech at ``rate`` (espeak-ng's voice, resampled), ``seconds`` long."""
    import soxr

    wav = subprocess.run(["espeak-ng", "--stdout", PHRASE], check=True,
                         capture_output=True).stdout
    audio, file_rate = sf.read(io.BytesIO(wav), dtype="float32")
    audio = soxr.resample(audio, file_rate, rate)
    voiced = np.flatnonzero(np.abs(audio) > 0.02)
    audio = audio[voiced[0]:voiced[0] + int(rate * seconds)]
    return np.clip(np.round(audio * 32767), -32768, 32767).astype(np.int16)


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def sherpa_seeds() -> list[bytes]:
    f32 = (speech(16000, 0.2).astype(np.float32) / 32768).astype("<f4").tobytes()
    audio = pieces(f32, 1600 * 4 // 4)  # 25 ms messages
    stereo = np.repeat(speech(16000, 0.1).astype(np.float32) / 32768, 2).astype("<f4")
    return [b"\x00" + encode_messages(audio + ["Done"]),
            b"\x00" + encode_messages(audio[:4] + ["Finalize"] + audio[4:] + ["Done"]),
            b"\x01" + encode_messages(pieces(stereo.tobytes(), 3200) + ["Done"]),
            b"\x00" + encode_messages(audio[:3] + [None] + audio[3:5] + ["Done"])]


def vosk_seeds() -> list[bytes]:
    audio = pieces(speech(8000, 0.3).astype("<i2").tobytes(), 800)
    config = {"config": {"sample_rate": 8000, "words": 1, "max_alternatives": 2,
                         "phrase_list": ["yes", "call me", "[unk]"],
                         "rule2_min_trailing_silence": 0.4}}
    return [b"\x00" + encode_messages(audio + ['{"eof" : 1}']),
            b"\x00" + encode_messages([json.dumps(config)] + audio + ['{"eof" : 1}']),
            b"\x00" + encode_messages(audio[:3] + ['{"reset" : 1}'] + audio[3:] + [None]),
            b"\x01" + encode_messages(pieces(np.repeat(speech(8000, 0.1), 2).astype("<i2")
                                             .tobytes(), 1600) + ['{"eof" : 1}'])]


def deepgram_seeds() -> list[bytes]:
    """The query the Deepgram SDK's live client sends, then its audio and control texts."""
    audio = pieces(speech(16000, 0.3).astype("<i2").tobytes(), 1600)
    stereo = pieces(np.repeat(speech(16000, 0.1), 2).astype("<i2").tobytes(), 3200)
    mulaw = pieces(mulaw_encode(speech(8000, 0.2)), 400)
    keep, final, close = ('{"type": "KeepAlive"}', '{"type": "Finalize"}',
                          '{"type": "CloseStream"}')
    base = "model=nova-3&encoding=linear16&sample_rate=16000"
    return [encode_messages([base] + audio + [close]),
            encode_messages([base + "&interim_results=true&vad_events=true"
                             "&utterance_end_ms=1000&punctuate=true&endpointing=300"]
                            + audio[:3] + [keep, final] + audio[3:] + [close]),
            encode_messages([base + "&channels=2&multichannel=true"] + stereo + [b""]),
            encode_messages(["model=nova-2&encoding=mulaw&sample_rate=8000"
                             "&keywords=call:2&keyterm=five&smart_format=true"]
                            + mulaw + [None])]


def assemblyai_seeds() -> list[bytes]:
    """The query AssemblyAI's SDK sends (lists JSON-encoded, Python's booleans), then its
    audio and control texts."""
    audio = pieces(speech(16000, 0.3).astype("<i2").tobytes(), 1600)
    mulaw = pieces(mulaw_encode(speech(8000, 0.2)), 400)
    force, keep, end = ('{"type": "ForceEndpoint"}', '{"type": "KeepAlive"}',
                        '{"type": "Terminate"}')
    update = json.dumps({"type": "UpdateConfiguration", "format_turns": True,
                         "max_turn_silence": 700, "end_of_turn_confidence_threshold": 0.6})
    return [encode_messages(["sample_rate=16000&encoding=pcm_s16le"] + audio + [end]),
            encode_messages(["sample_rate=16000&format_turns=True&max_turn_silence=500"
                             "&speech_model=universal-streaming-english"
                             "&end_of_turn_confidence_threshold=0.7"]
                            + audio[:3] + [keep, force, update] + audio[3:] + [end]),
            encode_messages(["sample_rate=8000&encoding=pcm_mulaw"
                             "&keyterms_prompt=%5B%22call%22%2C+%22five%22%5D"]
                            + mulaw + [None])]


def realtime_seeds() -> list[bytes]:
    """The events OpenAI's realtime client sends in a transcription session."""
    import base64

    def append(data: bytes) -> str:
        return json.dumps({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(data).decode()})

    pcm = [append(p) for p in pieces(speech(24000, 0.2).astype("<i2").tobytes(), 960)]
    ulaw = [append(p) for p in pieces(mulaw_encode(speech(8000, 0.2)), 320)]
    ga = {"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": {"model": "gpt-4o-transcribe", "language": "en", "prompt": "call"},
        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}}
    beta = {"type": "transcription_session.update", "session": {
        "input_audio_format": "g711_ulaw", "turn_detection": None,
        "input_audio_transcription": {"model": "whisper-1"}}}
    commit, clear = ('{"type": "input_audio_buffer.commit"}',
                     '{"type": "input_audio_buffer.clear"}')
    return [encode_messages([json.dumps(ga)] + pcm + [commit]),
            encode_messages(pcm[:3] + [clear] + pcm[3:] + [commit, None]),
            encode_messages([json.dumps(beta)] + ulaw + [commit])]


def twilio_seeds() -> list[bytes]:
    mono = speech(8000, 0.3).reshape(-1, 1)
    stereo = np.stack([speech(8000, 0.2)] * 2, axis=1)
    out = []
    for pcm, dtmf, custom in ((mono, {800: "5"}, {"text_format": "punct"}),
                              (stereo, None, {"rule2_min_trailing_silence": "0.4"}),
                              (mono[:800], {0: "#"}, None)):
        messages = [json.dumps(m) for _, m in
                    twilio_messages(pcm, "CA" + "1" * 32, "MZ" + "2" * 32, dtmf=dtmf,
                                    custom=custom)]
        out.append(encode_messages(messages))
    return out


def audiofork_seeds() -> list[bytes]:
    out = []
    for query, mix, rate, channels in (("", "mono", 8000, 1),
                                       ("mix=stereo&rate=16000", "stereo", 16000, 2),
                                       ("mix=mixed&rate=8k&text_format=punct", "mixed", 8000,
                                        1)):
        pcm = np.repeat(speech(rate, 0.2), channels).astype("<i2").tobytes()
        metadata = {"callSid": str(uuid.UUID(int=7)), "mixType": mix, "sampleRate": rate,
                    "rule1_min_trailing_silence": 1.5}
        frames = pieces(pcm, rate * 20 // 1000 * 2 * channels)
        out.append(encode_messages([query, json.dumps(metadata)] + frames[:3] + ["Finalize"]
                                   + frames[3:] + ["stop {\"reason\": \"hangup\"}"]))
    return out


def audiosocket_seeds() -> list[bytes]:
    out = []
    for rate, piece in ((8000, 0), (16000, 19), (48000, 255)):
        groups = audiosocket_frames(speech(rate, 0.1), uuid.UUID(int=42), rate,
                                    dtmf={160: "7"})
        out.append(bytes([piece]) + b"".join(f for g in groups for f in g))
    return out


def multipart_seeds() -> list[bytes]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, fields in (("WAV", {"response_format": "verbose_json"}),
                            ("FLAC", {"model": "whisper-1", "text_format": "punct",
                                      "rule2_min_trailing_silence": "0.4"})):
            path = Path(tmp) / f"call.{fmt.lower()}"
            sf.write(path, speech(8000, 0.2), 8000, format=fmt)
            body, content_type = multipart(fields, path)
            boundary = content_type.split("boundary=")[1]
            out.append(body.replace(boundary.encode(), fuzz_multipart.BOUNDARY.encode()))
    return out


def pcm_seeds() -> list[bytes]:
    pcm = speech(8000, 0.1)
    f32 = (pcm.astype(np.float32) / 32768).astype("<f4").tobytes()
    return [bytes([0]) + pcm.astype("<i2").tobytes(), bytes([1]) + f32,
            bytes([2]) + mulaw_encode(pcm), bytes([4]) + np.repeat(pcm, 2).tobytes()]


def config_seeds() -> list[bytes]:
    return [p.read_bytes() for p in sorted((REPO / "streamdec" / "configs").glob("*.toml"))]


def tokens_seeds() -> list[bytes]:
    return [(LAYOUTS / "A-streaming-zipformer2-chunk-16-left-128" / "tokens.txt").read_bytes(),
            (REPO / "streamdec" / "assets" / "synthetic-en" / "tokens.txt").read_bytes()]


def _onnx_line(value_info) -> str:
    from onnx import TensorProto

    kind = {v: k for k, v in fuzz_onnx_meta.TYPES.items()}.get(
        value_info.type.tensor_type.elem_type, TensorProto.DataType.Name(
            value_info.type.tensor_type.elem_type).lower())
    dims = ",".join(str(d.dim_value) if d.HasField("dim_value") else d.dim_param
                    for d in value_info.type.tensor_type.shape.dim)
    return f"@{value_info.name}\t{kind}\t{dims}"


def onnx_meta_seeds() -> list[bytes]:
    """Each fixture encoder's metadata and inputs (a decoder's context_size added), in
    the target's line format: the real exports' declarations, without their weights."""
    import onnx

    out = []
    for encoder in sorted(LAYOUTS.glob("*/encoder*.onnx")):
        if ".int8." in encoder.name:
            continue
        model = onnx.load(str(encoder), load_external_data=False)
        lines = [f"{p.key}\t{p.value}" for p in model.metadata_props] + ["context_size\t2"]
        lines += [_onnx_line(i) for i in model.graph.input]
        if len(model.graph.output) < len(model.graph.input):
            lines.append("-")
        out.append(("\n".join(lines) + "\n").encode())
    return sorted(set(out))


def catalog_seeds() -> list[bytes]:
    text = (REPO / "streamdec" / "hub" / "catalog.toml").read_text()
    first = text.index("[[model]]")
    second = text.index("[[model]]", first + 1)
    return [text.encode(), text[:second].encode()]


def archive_seeds() -> list[bytes]:
    tokens = (REPO / "streamdec" / "assets" / "synthetic-en" / "tokens.txt").read_bytes()
    files = {"tokens.txt": tokens, "README.md": b"a model\n", "encoder.onnx": b"\x08\x07"}
    out = []
    for mode in ("w", "w:gz", "w:bz2", "w:xz"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode=mode, format=tarfile.GNU_FORMAT) as tar:
            top = tarfile.TarInfo("model-x")
            top.type, top.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(top)
            for name, data in files.items():
                info = tarfile.TarInfo(f"model-x/{name}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
            if mode == "w":  # links, as some archives hold them
                link = tarfile.TarInfo("model-x/tokens-link.txt")
                link.type, link.linkname = tarfile.SYMTYPE, "tokens.txt"
                tar.addfile(link)
                hard = tarfile.TarInfo("model-x/tokens-hard.txt")
                hard.type, hard.linkname = tarfile.LNKTYPE, "model-x/tokens.txt"
                tar.addfile(hard)
        out.append(buffer.getvalue())
    return out


SEEDS = {"sherpa": sherpa_seeds, "vosk": vosk_seeds, "deepgram": deepgram_seeds,
         "assemblyai": assemblyai_seeds,
         "realtime": realtime_seeds, "twilio": twilio_seeds,
         "audiofork": audiofork_seeds, "audiosocket": audiosocket_seeds,
         "multipart": multipart_seeds, "pcm": pcm_seeds, "config": config_seeds,
         "tokens": tokens_seeds, "onnx_meta": onnx_meta_seeds, "catalog": catalog_seeds,
         "archive": archive_seeds}


def main(targets: list[str]) -> int:
    total = 0
    unknown = sorted(set(targets) - set(SEEDS))
    if unknown:
        print(f"unknown target {unknown[0]!r}: one of {', '.join(SEEDS)}", file=sys.stderr)
        return 2
    for target, make in SEEDS.items():
        if targets and target not in targets:
            continue
        folder = CORPUS / target
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for seed in make():
            (folder / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
            total += len(seed)
        print(f"{target:12s} {len(list(folder.iterdir()))} seeds")
    print(f"{total} bytes in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
