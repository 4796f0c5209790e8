"""Raw PCM bytes -> float32 samples in [-1, 1]: the one place that decodes the encodings
live sources send (WebSocket clients, raw telephone files, standard input).

=========  ==============================================  ===========
encoding   what                                            bytes/sample
=========  ==============================================  ===========
``s16le``  signed 16-bit little-endian (Vosk, WAV data)    2
``f32le``  32-bit float little-endian in [-1, 1] (sherpa)  4
``mulaw``  G.711 mu-law, 8 bits (telephony, ``.ul``)       1
``alaw``   G.711 A-law, 8 bits (PCMA: European telephony)  1
=========  ==============================================  ===========

Interleaved channels are split by ``deinterleave``. Decoded float samples are not checked
here: that is done where samples enter a stream (``features.as_float_samples``, which every
path to a decoder passes), so a live message's samples are checked once.
"""

from __future__ import annotations

import numpy as np

from ..errors import AudioInputError

__all__ = ["ENCODINGS", "sample_size", "decode_pcm", "deinterleave", "MULAW_TABLE",
           "ALAW_TABLE"]

ENCODINGS = ("s16le", "f32le", "mulaw", "alaw")
_SIZES = {"s16le": 2, "f32le": 4, "mulaw": 1, "alaw": 1}


def _mulaw_table() -> np.ndarray:
    """G.711 mu-law byte -> linear sample / 32768 (the standard's expansion: bits are
    inverted, then magnitude = ((mantissa << 3) + 0x84) << exponent, minus the bias 0x84)."""
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent, mantissa = (u >> 4) & 0x07, u & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return (np.where(u & 0x80, -magnitude, magnitude) / 32768.0).astype(np.float32)


MULAW_TABLE = _mulaw_table()


def _alaw_table() -> np.ndarray:
    """G.711 A-law byte -> linear sample / 32768 (the standard's expansion: even bits are
    inverted (xor 0x55); segment 0 gives (mantissa << 4) + 8, segment s > 0
    ((mantissa << 4) + 0x108) << (s - 1); the top bit set means positive)."""
    a = np.arange(256, dtype=np.int32) ^ 0x55
    segment, mantissa = (a >> 4) & 0x07, a & 0x0F
    magnitude = np.where(segment == 0, (mantissa << 4) + 8,
                         ((mantissa << 4) + 0x108) << np.maximum(segment - 1, 0))
    return (np.where(a & 0x80, magnitude, -magnitude) / 32768.0).astype(np.float32)


ALAW_TABLE = _alaw_table()


def sample_size(encoding: str) -> int:
    """Bytes per sample of ``encoding`` (AudioInputError for an unknown one)."""
    try:
        return _SIZES[encoding]
    except KeyError:
        raise AudioInputError(f"unknown encoding {encoding!r}; known: "
                              f"{', '.join(ENCODINGS)}") from None


def decode_pcm(data: bytes | bytearray | memoryview, encoding: str, channels: int = 1
               ) -> np.ndarray:
    """Bytes of whole samples (of every channel) -> a new float32 array, interleaved as
    sent; empty data gives an empty array.

    Raises AudioInputError when the byte count is not a multiple of the frame size
    (sample size x channels) and for an unknown encoding. f32le samples are as sent, NaN,
    infinity and values outside [-1, 1] included: ``Stream.accept_waveform`` decides what
    is valid (``features.as_float_samples``)."""
    data = memoryview(data).cast("B")  # bytes, whatever the buffer's item type
    size = sample_size(encoding) * channels
    if len(data) % size:
        raise AudioInputError(
            f"{len(data)} bytes is not a whole number of {encoding} samples"
            + (f" x {channels} channels" if channels > 1 else "")
            + f" ({size} bytes each)")
    if encoding == "s16le":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    if encoding == "mulaw":
        return MULAW_TABLE[np.frombuffer(data, dtype=np.uint8)]
    if encoding == "alaw":
        return ALAW_TABLE[np.frombuffer(data, dtype=np.uint8)]
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


def deinterleave(samples: np.ndarray, channels: int) -> list[np.ndarray]:
    """Interleaved (n * channels,) -> one contiguous (n,) array per channel."""
    if channels == 1:
        return [samples]
    return [np.ascontiguousarray(samples[c::channels]) for c in range(channels)]
