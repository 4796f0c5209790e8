"""Fuzz target: raw PCM as a live source sends it (``decode_pcm``, ``deinterleave`` and
the check every stream's audio passes, ``as_float_samples``). The first byte picks the
encoding (s16le, f32le, mulaw, or an unknown one) and 1 to 3 channels; the rest is the
audio. Invariants: whole samples decode to bytes / (sample size x channels) frames per
channel, anything else is AudioInputError; decoded s16le and mu-law are within [-1, 1]."""

from __future__ import annotations

from harness import fuzz, instrumented

with instrumented():
    from streamdec.errors import AudioInputError
    from streamdec.audio.features import as_float_samples
    from streamdec.audio.pcm import ENCODINGS, decode_pcm, deinterleave, sample_size

CHOICES = ENCODINGS + ("s24le",)


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    encoding, channels, audio = CHOICES[data[0] % 4], 1 + (data[0] >> 2) % 3, data[1:]
    try:
        samples = decode_pcm(audio, encoding, channels)
    except AudioInputError:
        assert encoding not in ENCODINGS or len(audio) % (sample_size(encoding) * channels)
        return
    size = sample_size(encoding)
    assert samples.dtype.name == "float32" and samples.size * size == len(audio)
    split = deinterleave(samples, channels)
    assert [c.size for c in split] == [len(audio) // size // channels] * channels
    if encoding != "f32le" and samples.size:
        assert float(abs(samples).max()) <= 1.0
    for channel in split:
        try:
            checked = as_float_samples(channel)
        except AudioInputError:
            continue  # empty, NaN/inf or far beyond [-1, 1]: the stream refuses it
        assert checked.size == channel.size and float(abs(checked).max()) <= 1.0


if __name__ == "__main__":
    fuzz(TestOneInput)
