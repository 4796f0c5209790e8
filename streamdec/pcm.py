"""Headerless PCM bytes -> mono float32 samples in [-1, 1].

The one decoder of raw audio, for every adapter that receives it (raw files, standard
input, WebSocket binary messages). Encodings, one channel each:

- ``s16le``: signed 16-bit little-endian integers, scaled by 1/32768;
- ``f32le``: 32-bit IEEE floats, little-endian, taken as they are (the stream rejects
  NaN/inf and values outside [-1, 1]);
- ``mulaw``: ITU-T G.711 mu-law, one byte a sample, expanded to 16-bit linear values
  (at most 32124 in magnitude) and scaled by 1/32768, as telephone ``.ul`` files hold.
"""

from __future__ import annotations

import numpy as np

from .errors import AudioInputError, ConfigError

__all__ = ["PCM_ENCODINGS", "SAMPLE_BYTES", "MULAW_TO_LINEAR", "decode_pcm"]

#: Encodings ``decode_pcm`` reads, the same names in the CLI and the servers.
PCM_ENCODINGS = ("s16le", "f32le", "mulaw")

#: Bytes of one sample of each encoding.
SAMPLE_BYTES = {"s16le": 2, "f32le": 4, "mulaw": 1}


def _mulaw_table() -> np.ndarray:
    """G.711 expansion of every mu-law byte to a 16-bit linear value.

    A code is stored inverted; after inversion bit 7 is the sign (set: negative), bits 4-6
    the segment (exponent) and bits 0-3 the step (mantissa). The magnitude is
    ``((step << 3) + 132) << segment`` minus the bias 132, so 0xFF and 0x7F are 0 and 0x80
    / 0x00 are +32124 / -32124."""
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    magnitude = ((((code & 0x0F) << 3) + 0x84) << ((code >> 4) & 0x07)) - 0x84
    table = np.where(code & 0x80, -magnitude, magnitude).astype(np.int16)
    table.setflags(write=False)
    return table


#: mu-law byte -> 16-bit linear value (read-only).
MULAW_TO_LINEAR = _mulaw_table()


def decode_pcm(data: bytes | bytearray | memoryview, encoding: str) -> np.ndarray:
    """Decode raw mono PCM ``data`` in ``encoding`` (one of PCM_ENCODINGS) into a new 1-D
    float32 array. Raises ConfigError for an unknown encoding and AudioInputError when the
    byte count is not a whole number of samples; empty data gives an empty array."""
    if encoding not in SAMPLE_BYTES:
        raise ConfigError(f"unknown PCM encoding {encoding!r}; known: {', '.join(PCM_ENCODINGS)}")
    data = memoryview(data).cast("B")  # bytes, whatever the buffer's item type
    width = SAMPLE_BYTES[encoding]
    if len(data) % width:
        raise AudioInputError(f"{len(data)} byte(s) of {encoding} audio: not a whole number "
                              f"of {width}-byte samples")
    if encoding == "s16le":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / np.float32(32768.0)
    if encoding == "f32le":
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
    codes = np.frombuffer(data, dtype=np.uint8)
    return MULAW_TO_LINEAR[codes].astype(np.float32) / np.float32(32768.0)
