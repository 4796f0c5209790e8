"""Helpers that drive streams through a recognizer the way an application does."""

from __future__ import annotations

import numpy as np

from streamdec import Recognizer, Result
from streamdec.core.drive import decode_audio, decode_ready


def decode_in_pieces(rec: Recognizer, audio: np.ndarray, piece: int, rate: int = 16000,
                     **stream_kw) -> list[Result]:
    """Feed ``audio`` in pieces of ``piece`` samples, decoding as chunks become ready;
    returns every event."""
    return decode_audio(rec, rec.create_stream(**stream_kw), rate,
                        (audio[i:i + piece] for i in range(0, len(audio), piece)))


def finals(events: list[Result]) -> list[Result]:
    return [e for e in events if e.is_final]


def key(results: list[Result]) -> list[tuple]:
    """What must be identical between two decodes of the same audio."""
    return [(r.segment, r.token_ids, r.timestamps, r.start_time) for r in results]


def decode_together(rec: Recognizer, streams: list, audios: list[np.ndarray], piece: int,
                    rate: int = 16000) -> list[list[Result]]:
    """Feed several streams in interleaved pieces (streams at different points, ending at
    different times) and decode them together in batches; returns each stream's events."""
    events: list[list[Result]] = [[] for _ in audios]
    pos = 0
    while not all(s.done for s in streams):
        for s, a in zip(streams, audios):
            if pos < len(a):
                s.accept_waveform(rate, a[pos:pos + piece])
            elif not s.input_done:
                s.input_finished()
        pos += piece
        decode_ready(rec, streams)
        for ev, s in zip(events, streams):
            ev += s.pop_events()
    return events


def sherpa_decode(model_dir, model_type: str, audio: np.ndarray, tail_padding_frames: int,
                  method: str = "greedy_search", paths: int = 4):
    """sherpa-onnx's result on the same model files and audio, with the same tail padding
    streamdec adds itself (sherpa-onnx runs only whole chunks)."""
    return sherpa_result(model_dir / "encoder.onnx", model_dir / "decoder.onnx",
                         model_dir / "joiner.onnx", model_dir / "tokens.txt", audio,
                         tail_padding_frames * 160, method, paths, model_type)


def sherpa_result(encoder, decoder, joiner, tokens, audio: np.ndarray, tail_samples: int,
                  method: str = "greedy_search", paths: int = 4, model_type: str = ""):
    """sherpa-onnx's result on the given files: 16 kHz float32 ``audio``, then
    ``tail_samples`` zeros, then the end of input; ``model_type`` "" lets sherpa-onnx detect
    it from the metadata."""
    import sherpa_onnx

    rec = sherpa_onnx.OnlineRecognizer.from_transducer(
        tokens=str(tokens), encoder=str(encoder), decoder=str(decoder), joiner=str(joiner),
        num_threads=1, sample_rate=16000, feature_dim=80, decoding_method=method,
        max_active_paths=paths, model_type=model_type)
    s = rec.create_stream()
    s.accept_waveform(16000, np.concatenate([audio, np.zeros(tail_samples, np.float32)]))
    s.input_finished()
    while rec.is_ready(s):
        rec.decode_stream(s)
    return rec.get_result_all(s)
