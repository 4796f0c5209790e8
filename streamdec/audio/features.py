"""Streaming fbank features with the exact options the transducer models were trained on.

Samples at any rate go in (float in [-1, 1] or int16; anything else is rejected); they
are resampled to the model's rate with a streaming soxr resampler (never restarted per
chunk) and turned into 80-dim log-mel fbank frames: Kaldi's fbank, the window and mel
weights of kaldi-native-fbank applied to many frames at once (``fbank``). Frames come out
as float32 arrays of shape (num_frames, num_bins).

Typical use (what ``Stream`` does)::

    feats = StreamingFeatures(FeatureConfig())
    feats.accept_waveform(8000, samples)   # any rate, any chunk size
    feats.input_finished(tail_padding_frames=40)
    frames = feats.frames(start, count)   # (count, 80)

Frames are counted as their samples arrive (``num_frames_ready``) and computed when first
read (``frames``): a decode reads a whole chunk, which numpy computes at about half the
cost per frame of the ~10 frames of one live message (``fbank``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import soxr

from ..buffers import size_class
from ..errors import AudioInputError, ConfigError, StreamStateError
from ..validation import require_finite, require_positive, require_sample_rate
from .fbank import BLOCK_FRAMES, OnlineFbank, fbank_for, fbank_options

__all__ = ["FeatureConfig", "StreamingFeatures", "fbank_options", "compute_fbank", "as_float_samples",
           "compute_ready_together", "MAX_FLOAT_PEAK"]

#: ``compute_ready_together`` computes up to this many frames in one ``log_mel`` call
#: (the fbank's fixed cost per call shared by several streams' chunks) and a stream with
#: more pending than this alone
TOGETHER_FRAMES = 4 * BLOCK_FRAMES
#: a stream's computed frames are kept in a buffer of at least this many rows (its size
#: class: ``buffers.size_class``); a live stream keeps about one chunk's (tens of rows)
MIN_FRAME_ROWS = 128


@dataclass(frozen=True)
class FeatureConfig:
    """Fbank options. The defaults are the published models' training options: change
    them only for a model trained otherwise (kaldi-compatible fbank: 25 ms povey window,
    10 ms shift, no dither, snip_edges false, preemphasis 0.97, DC offset removed)."""

    sample_rate: int = 16000  # the model's rate; input at other rates is resampled to it
    num_bins: int = 80  # mel bins = encoder input dim
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    low_freq: float = 20.0
    high_freq: float = -400.0  # negative: offset from Nyquist
    resample_quality: str = "HQ"  # soxr quality: QQ, LQ, MQ, HQ, VHQ

    def __post_init__(self) -> None:
        require_finite(self, "features")
        if self.frame_length_ms <= 0 or self.frame_shift_ms <= 0:
            raise ConfigError(f"features: frame_length_ms and frame_shift_ms must be positive, "
                              f"got {self}")
        require_sample_rate(self.sample_rate, "features.sample_rate")
        require_positive(self, "features", ("num_bins",))
        if self.resample_quality not in ("QQ", "LQ", "MQ", "HQ", "VHQ"):
            raise ConfigError(f"features: unknown resample_quality {self.resample_quality!r}")

    @property
    def frame_shift_samples(self) -> int:
        return int(round(self.sample_rate * self.frame_shift_ms / 1000))


#: Float samples beyond [-1, 1] up to this magnitude are clipped; beyond it, rejected.
MAX_FLOAT_PEAK = 2.0


def finite_range(samples: np.ndarray) -> tuple[float, float]:
    """(lowest, highest) sample of a non-empty float array; AudioInputError when a sample
    is NaN or infinite (they show in the ufuncs' own reductions: two passes, no temporary
    array)."""
    low, high = float(np.minimum.reduce(samples)), float(np.maximum.reduce(samples))
    if not (math.isfinite(low) and math.isfinite(high)):
        raise AudioInputError("samples contain NaN or infinity")
    return low, high


def as_float_samples(samples: np.ndarray) -> np.ndarray:
    """Validate one chunk of mono audio and return it as float32 in [-1, 1].

    Accepts float32/float64 in [-1, 1] or int16 (scaled by 1/32768). Float overshoot up to
    ``MAX_FLOAT_PEAK`` (float audio after gain or resampling, a browser's Web Audio) is
    clipped to [-1, 1], as a converter would; beyond it the chunk is rejected: such floats
    are on another scale (int16 values stored as float), not loud audio. Raises
    AudioInputError for that, any other dtype, a non-1-D shape, an empty chunk or NaN/inf."""
    if not isinstance(samples, np.ndarray):
        raise AudioInputError(f"samples must be a numpy array, got {type(samples).__name__}")
    if samples.ndim != 1:
        raise AudioInputError(f"samples must be 1-D mono, got shape {samples.shape}")
    if samples.size == 0:
        raise AudioInputError("empty waveform: a chunk must hold at least one sample")
    if samples.dtype == np.int16:
        return samples.astype(np.float32) / 32768.0
    if samples.dtype not in (np.float32, np.float64):
        raise AudioInputError(
            f"samples must be float32/float64 in [-1, 1] or int16, got dtype {samples.dtype}")
    low, high = finite_range(samples)
    peak = max(high, -low)
    if peak > MAX_FLOAT_PEAK:
        raise AudioInputError(f"float samples must lie in [-1, 1] (overshoot up to "
                              f"{MAX_FLOAT_PEAK:g} is clipped), got a peak of {peak:.4g}: "
                              "not on the float scale (int16 values stored as float?)")
    samples = samples.astype(np.float32, copy=False)
    return np.clip(samples, -1.0, 1.0) if peak > 1.0 else samples


class StreamingFeatures:
    """Per-stream feature extractor: resampler state + fbank state + frames not yet dropped.

    Frame indices are absolute (from the stream's start); ``drop_before(i)`` frees memory
    of frames the encoder no longer needs (and passes over those never read). Frames are
    computed on the first ``frames`` call that needs them."""

    def __init__(self, config: FeatureConfig, on_samples=None) -> None:
        """``on_samples``: called with each piece of audio at the model's rate (after
        resampling, before the fbank; not the tail padding), e.g. a stream's VAD queue."""
        self.config = config
        self._on_samples = on_samples
        self._fbank = OnlineFbank(fbank_for(config))
        self._input_rate: int | None = None
        self._resampler: soxr.ResampleStream | None = None
        # Computed frames live in rows [_lo, _hi) of _buf (absolute index _first_frame at
        # row _lo); the fbank holds the ready frames after them, not computed yet.
        # Rows are only ever appended, never rewritten: a view handed out by frames() stays
        # valid while a worker thread reads it; a full buffer is replaced by a new one, of
        # its size or the next size class (buffers.size_class: few sizes, no heap holes).
        self._buf: np.ndarray = np.zeros((0, config.num_bins), dtype=np.float32)
        self._lo = self._hi = 0
        self._first_frame = 0
        self._finished = False
        self.num_samples_accepted = 0  # at the input rate
        self.num_samples_fed = 0  # at the model's rate, silence inserted included

    @property
    def input_rate(self) -> int | None:
        return self._input_rate

    @property
    def num_frames_ready(self) -> int:
        """Frames whose samples have arrived (computed or not)."""
        return self._fbank.num_frames_ready

    @property
    def _num_computed(self) -> int:
        """Frames computed (or passed over): the fbank's next frame is this one."""
        return self._first_frame + self._hi - self._lo

    @property
    def finished(self) -> bool:
        return self._finished

    def accept_waveform(self, sample_rate: int, samples: np.ndarray) -> None:
        """Add one chunk of mono audio. The rate must stay the same for the whole stream."""
        if self._finished:
            raise StreamStateError("accept_waveform after input_finished")
        require_sample_rate(sample_rate, error=AudioInputError)
        x = as_float_samples(samples)  # before any state changes: a bad chunk leaves none
        if self._input_rate is None:
            self._input_rate = int(sample_rate)
            if self._input_rate != self.config.sample_rate:
                self._resampler = soxr.ResampleStream(
                    self._input_rate, self.config.sample_rate, 1, dtype="float32",
                    quality=self.config.resample_quality)
        elif sample_rate != self._input_rate:
            raise AudioInputError(
                f"sample rate changed mid-stream from {self._input_rate} to {sample_rate} Hz")
        self.num_samples_accepted += len(x)
        if self._resampler is not None:
            x = self._resampler.resample_chunk(x.astype(np.float32, copy=False), last=False)
        self._feed(x)

    def input_finished(self, tail_padding_frames: int = 0) -> None:
        """No more audio: flush the resampler, append ``tail_padding_frames`` frames of
        silence (so the encoder's last chunk is complete) and flush the fbank."""
        if self._finished:
            return
        if self._resampler is not None:
            self._feed(self._resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
        if tail_padding_frames > 0:
            self._fbank.accept_waveform(
                np.zeros(tail_padding_frames * self.config.frame_shift_samples, np.float32))
        self._fbank.input_finished()
        self._finished = True

    def flush_resampler(self) -> None:
        """Push out the audio the resampler still holds (as at the end of the input) and
        start a fresh resampler for the audio that follows (a force-final)."""
        if self._resampler is not None:
            self._feed(self._resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
            self._resampler = soxr.ResampleStream(
                self._input_rate, self.config.sample_rate, 1, dtype="float32",
                quality=self.config.resample_quality)

    def insert_silence(self, samples: int) -> None:
        """Append ``samples`` zeros at the model's rate (a force-final pads the audio so its
        last chunk is complete); the input goes on after them."""
        if self._finished:
            raise StreamStateError("insert_silence after input_finished")
        self._feed(np.zeros(samples, np.float32))

    def frames(self, start: int, count: int) -> np.ndarray:
        """Frames [start, start + count) as a (count, num_bins) float32 array: a view
        that frames accepted later never change. Computes the ready frames not computed
        yet when it needs them."""
        lo = start - self._first_frame
        if lo < 0 or start + count > self.num_frames_ready:
            raise IndexError(f"frames [{start}, {start + count}) not available "
                             f"(have [{self._first_frame}, {self.num_frames_ready}))")
        if self._num_computed < start + count:
            self.compute_ready()
        return self._buf[self._lo + lo:self._lo + lo + count]

    def compute_ready(self) -> None:
        """Compute every ready frame now (``frames`` would compute them when first read)."""
        if self._num_computed < self.num_frames_ready:
            self._append(self._fbank.take())

    def drop_before(self, index: int) -> None:
        """Free frames before absolute index ``index`` (their rows are reused when the
        buffer is next replaced); ready frames before it never computed (a VAD's skipped
        silence) never will be."""
        if index > self._num_computed:
            self._fbank.skip(index)
            self._lo = self._hi
            self._first_frame = self._fbank.num_frames_taken
            return
        n = index - self._first_frame
        if n > 0:
            self._lo += n
            self._first_frame += n

    def _feed(self, x: np.ndarray) -> None:
        self.num_samples_fed += len(x)
        if len(x):
            if self._on_samples is not None:
                self._on_samples(x)
            self._fbank.accept_waveform(x)

    def _append(self, new: np.ndarray) -> None:
        live, n = self._hi - self._lo, len(new)
        if n == 0:
            return
        if self._hi + n > len(self._buf):  # a new buffer holding the live frames only
            rows = max(len(self._buf), size_class(2 * (live + n), MIN_FRAME_ROWS))  # one size
            buf = np.empty((rows, self.config.num_bins), np.float32)
            buf[:live] = self._buf[self._lo:self._hi]
            self._buf, self._lo, self._hi = buf, 0, live
        self._buf[self._hi:self._hi + n] = new
        self._hi += n


def compute_ready_together(streams: Iterable[StreamingFeatures]) -> None:
    """``compute_ready`` of each of ``streams``, the frames of those that share a fbank
    computed in as few ``log_mel`` calls as ``TOGETHER_FRAMES`` allows: the same values as
    each stream alone (the fbank is row-wise), for less per frame (live messages make each
    stream's chunk whole a few at a time)."""
    groups: dict[int, list[StreamingFeatures]] = {}
    for f in streams:
        pending = f.num_frames_ready - f._num_computed
        if pending > TOGETHER_FRAMES:
            f.compute_ready()
        elif pending > 0:
            groups.setdefault(id(f._fbank.fbank), []).append(f)
    for group in groups.values():
        fbank, windows = group[0]._fbank.fbank, [f._fbank.take_windows() for f in group]
        rows = windows[0] if len(windows) == 1 else np.concatenate(windows)
        out = (fbank.log_mel(rows) if len(rows) <= TOGETHER_FRAMES else
               np.concatenate([fbank.log_mel(rows[a:a + TOGETHER_FRAMES])
                               for a in range(0, len(rows), TOGETHER_FRAMES)]))
        row = 0
        for f, w in zip(group, windows):
            f._append(out[row:row + len(w)])
            row += len(w)


def compute_fbank(samples: np.ndarray, sample_rate: int, config: FeatureConfig | None = None,
                  tail_padding_frames: int = 0) -> np.ndarray:
    """Whole-utterance fbank, identical to streaming the same samples through StreamingFeatures."""
    feats = StreamingFeatures(config or FeatureConfig())
    feats.accept_waveform(sample_rate, samples)
    feats.input_finished(tail_padding_frames)
    return feats.frames(0, feats.num_frames_ready)
