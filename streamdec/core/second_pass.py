"""The second pass: each utterance the first pass ends is decoded again by an offline model
(``streamdec.models.offline``; Whisper first), and its final carries that model's words.

Free of I/O and threads, like the search: a stream keeps its recent audio at the model's
rate (``KeptAudio``, bounded); at a final, ``SecondPass.clip`` takes the utterance's audio
(from ``context_seconds`` before its speech starts to the end of the segment: where the
first pass's first word starts, or earlier where a sound of the segment before that word is
within ``ONSET_DB`` of the utterance's loudest, a first word the first pass missed),
``SecondPass.run`` decodes it (pure: any thread) and gives the final to hand out. The
engine runs it in worker threads under a deadline; the synchronous loop
(``streamdec.core.drive``) runs it in place.

What a second-pass final carries (``Result``):
- ``second_pass``: ``"done"`` (its words), ``"rejected"`` (the model's output failed a
  check below: the first pass's words kept), ``"skipped"`` (not run: past the deadline,
  the queue full, or the utterance longer than the audio kept; the first pass's words);
  ``""`` where no second pass is configured or the first pass heard nothing;
- ``first_pass``: the first pass's final, whole, beside it;
- ``text``/``words``: Whisper's words in the first pass's raw style (upper case, no
  punctuation but apostrophes; a hyphenated word is several, its time shared out evenly),
  so that every consumer of raw text sees one style;
  ``display``/``display_words``: Whisper's own text and words as it wrote them (its casing
  and punctuation kept, not re-made: the formatter leaves a final with ``display`` alone);
- word times: Whisper's own (its cross-attention alignment), placed on the stream's clock
  by adding where the clip starts; ``tokens`` are the words (ids -1: no unit of the first
  pass's vocabulary), ``timestamps`` their starts from the segment start, ``log_probs``
  the log of Whisper's word probabilities;
- an n-best where the stream's search asks for one (``nbest`` > 1; else ``alternatives``
  empty): up to ``nbest`` alternatives of distinct raw text, best first. The first is the
  final itself (the text the checks accepted); the others come from a beam search of
  Whisper of width ``HYPOTHESES_PER_ALTERNATIVE`` x ``nbest`` over the same clip (a second
  decode, only where an n-best is asked), hypotheses that read the same in the raw style
  merged into their best (casing and punctuation often are all they differ by), in Whisper's
  order; each carries its text (``display``: as Whisper wrote it) and score, no tokens,
  words or times (Whisper aligns the final's words only). An alternative's ``score`` is Whisper's
  length-normalised log-prob: its tokens' total log-prob over their number (CTranslate2's
  score), the best of the hypotheses merged into it; the first's is that of the beam's
  hypotheses reading as the final, or, when the beam has none, its own decode's average
  log-prob (the final's ``score`` stays the sum of its words' log-probs). A clip longer
  than Whisper's window (30 s) gets the final alone. A rejected or skipped final keeps the
  first pass's n-best with its words.

Checks (a failure falls back to the first pass, ``"rejected"``): the model runs only where
the first pass heard words (never on silence the endpoint closed); then Whisper's own
checks, per decoded window: no-speech probability above ``no_speech_threshold`` with an
average log-prob below ``log_prob_threshold``, an average log-prob below
``log_prob_threshold``, a compression ratio above ``compression_ratio_threshold`` (a
repetition loop); and ours: no words at all, more than ``max_words_per_second`` words a
second, a run of one to four words repeated more than ``max_repeats`` times in a row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import ConfigError
from ..validation import require_finite
from .results import Result, Word

if TYPE_CHECKING:
    from ..models.offline import OfflineHypothesis, OfflineModel, OfflineTranscript

__all__ = ["SecondPassConfig", "KeptAudio", "Clip", "SecondPass", "check_transcript",
           "raw_style", "nbest_alternatives", "speech_start", "DONE", "REJECTED", "SKIPPED"]

DONE, REJECTED, SKIPPED = "done", "rejected", "skipped"
#: Whisper hypotheses asked per alternative: many differ from a better one only in casing
#: or punctuation, and merge into it in the raw style
HYPOTHESES_PER_ALTERNATIVE = 4
MAX_BEAM = 64
#: an utterance's speech starts at its first frame (``ONSET_FRAME_SECONDS``) within
#: ``ONSET_DB`` of its loudest (``speech_start``)
ONSET_DB = 20.0
ONSET_FRAME_SECONDS = 0.01


@dataclass(frozen=True)
class SecondPassConfig:
    enabled: bool = False
    # the offline model: Whisper through faster-whisper (``streamdec.models.whisper``)
    model: str = "tiny.en"  # tiny.en, base (packaged), a downloaded name, or a folder
    compute_type: str = "int8"
    threads: int = 1  # CTranslate2 threads per decode
    beam_size: int = 1  # 1: greedy
    prompt: str = ""  # a fixed initial prompt (empty: none; nothing carried between finals)
    # audio
    context_seconds: float = 0.3  # kept before the utterance's speech starts
    max_seconds: float = 30.0  # audio kept per stream; a longer utterance is skipped
    # cost (the engine): a final waits at most ``deadline_seconds`` after its endpoint for
    # its second pass; at most ``queue`` second passes wait or run at once per engine,
    # in ``workers`` threads of their own
    deadline_seconds: float = 1.5
    queue: int = 8
    workers: int = 1
    # checks (Whisper's own thresholds, and ours)
    no_speech_threshold: float = 0.6
    log_prob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4
    max_words_per_second: float = 6.0
    max_repeats: int = 3
    # partials refreshed by local agreement (``streamdec.core.local_agreement``): off by
    # default (one offline decode per refresh: for few streams); every ``refresh_ms`` of a
    # stream's audio its open utterance is decoded again
    local_agreement: bool = False
    refresh_ms: int = 1000

    def __post_init__(self) -> None:
        require_finite(self, "second_pass")
        if not (0 <= self.context_seconds <= 2 and 1 <= self.max_seconds <= 600):
            raise ConfigError("second_pass: context_seconds must be in [0, 2] and max_seconds "
                              f"in [1, 600]: {self.context_seconds}, {self.max_seconds}")
        if not (0 < self.deadline_seconds <= 60):
            raise ConfigError(f"second_pass: deadline_seconds must be in (0, 60]: "
                              f"{self.deadline_seconds}")
        if not (1 <= self.queue <= 10_000 and 1 <= self.workers <= 64):
            raise ConfigError(f"second_pass: queue must be in [1, 10000] and workers in "
                              f"[1, 64]: {self.queue}, {self.workers}")
        if not (0 < self.no_speech_threshold <= 1 and self.compression_ratio_threshold > 0
                and self.max_words_per_second > 0 and self.max_repeats >= 1):
            raise ConfigError(f"second_pass: a check's threshold is out of range: {self}")
        if not isinstance(self.local_agreement, bool):
            raise ConfigError(f"second_pass: local_agreement must be true or false: "
                              f"{self.local_agreement!r}")
        if not (200 <= self.refresh_ms <= 10_000):
            raise ConfigError(f"second_pass: refresh_ms must be in [200, 10000]: "
                              f"{self.refresh_ms}")
        self.whisper_config()  # the model's own settings checked now

    def whisper_config(self):
        from ..models.whisper import WhisperConfig

        return WhisperConfig(model=self.model, compute_type=self.compute_type,
                             threads=self.threads, beam_size=self.beam_size, prompt=self.prompt)


class KeptAudio:
    """A stream's most recent audio at the model's rate: at least its last ``capacity``
    samples (at most twice that: the buffer moves once per ``capacity`` samples); indices
    count the stream's samples from its start (inserted silence taken out)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._buf = np.zeros(2 * capacity, np.float32)
        self._n = 0  # samples in _buf
        self.first = 0  # stream index of _buf[0]

    @property
    def end(self) -> int:
        """Stream index one past the last sample kept."""
        return self.first + self._n

    def append(self, x: np.ndarray) -> None:
        n = len(x)
        if n >= self.capacity:  # only its end is kept
            self.first = self.end + n - self.capacity
            self._buf[:self.capacity] = x[n - self.capacity:]
            self._n = self.capacity
            return
        if self._n + n > len(self._buf):  # keep the newest ``capacity - n``, then x
            keep = self.capacity - n
            drop = self._n - keep
            self._buf[:keep] = self._buf[drop:self._n]
            self.first += drop
            self._n = keep
        self._buf[self._n:self._n + n] = x
        self._n += n

    def drop_last(self, n: int) -> None:
        """Forget the last ``n`` samples (silence a force-final inserted: not the stream's)."""
        self._n = max(0, self._n - n)

    def clip(self, start: int, end: int) -> np.ndarray | None:
        """A copy of samples [start, end) (cut to what has arrived); None when part of it is
        no longer kept."""
        if start < self.first:
            return None
        end = min(end, self.end)
        return self._buf[start - self.first:max(start, end) - self.first].copy()


@dataclass(frozen=True, eq=False)
class Clip:
    """An utterance's audio for the second pass."""

    samples: np.ndarray  # (n,) float32 at the offline model's rate
    start: float  # seconds from the stream start of samples[0]


_WORD = re.compile(r"[^\w']+")


def raw_style(text: str) -> str:
    """A word as the first pass writes it: upper case, no punctuation but apostrophes,
    other punctuation inside a word a boundary (``"Hello,"`` -> ``"HELLO"``; ``"don't"``
    -> ``"DON'T"``; ``"ill-disposed"`` -> ``"ILL DISPOSED"``; ``"..."`` -> ``""``)."""
    return " ".join(p.strip("'").upper() for p in _WORD.sub(" ", text).split()
                    if p.strip("'"))


def _repeats(words: list[str], longest: int = 4) -> int:
    """The most times a run of 1 to ``longest`` words comes in a row."""
    most = 1 if words else 0
    for n in range(1, longest + 1):
        for i in range(len(words) - n):
            count, j = 1, i + n
            while words[j:j + n] == words[i:i + n]:
                count, j = count + 1, j + n
            most = max(most, count)
    return most


def check_transcript(config: SecondPassConfig, out: "OfflineTranscript",
                     seconds: float) -> str:
    """Why the model's output over ``seconds`` of audio is not to be trusted ("" when it
    passes every check: see the module notes)."""
    for s in out.segments:
        if s.no_speech_prob > config.no_speech_threshold \
                and s.avg_logprob < config.log_prob_threshold:
            return f"no speech (probability {s.no_speech_prob:.2f})"
        if s.avg_logprob < config.log_prob_threshold:
            return f"average log-prob {s.avg_logprob:.2f}"
        if s.compression_ratio > config.compression_ratio_threshold:
            return f"compression ratio {s.compression_ratio:.2f}"
    words = [w for w in (raw_style(w.text) for w in out.words) if w]
    if not words:
        return "no words"
    if len(words) > config.max_words_per_second * max(seconds, 1.0):
        return f"{len(words)} words in {seconds:.1f} s"
    if _repeats(words) > config.max_repeats:
        return "a repetition loop"
    return ""


def speech_start(samples: np.ndarray, first_word: int, frame: int) -> int:
    """Where an utterance's speech starts in ``samples`` (its segment's audio, (n,)): the
    first frame of ``frame`` samples before sample ``first_word`` (the first pass's first
    word) whose RMS is within ``ONSET_DB`` of the loudest frame's, else ``first_word``.

    The first pass may miss an utterance's first words (the built-in model does, now and
    then, depending on where its chunks fall in the audio): their sound still comes before
    its first word, as loud as speech, and the second pass must hear it."""
    first_word = max(0, min(first_word, len(samples)))
    n = len(samples) // frame
    if n == 0 or first_word < frame:
        return first_word
    rms = np.sqrt(np.mean(np.square(samples[:n * frame].reshape(n, frame),
                                    dtype=np.float64), axis=1))
    loud = np.flatnonzero(rms[:first_word // frame] >= rms.max() * 10 ** (-ONSET_DB / 20))
    return int(loud[0]) * frame if len(loud) and rms.max() > 0 else first_word


class SecondPass:
    """Shared by every stream (holds the model and the config, no per-stream state)."""

    def __init__(self, config: SecondPassConfig, model: "OfflineModel") -> None:
        self.config = config
        self.model = model

    @property
    def sample_rate(self) -> int:
        return self.model.sample_rate

    def applies(self, final: Result) -> bool:
        """Whether ``final`` gets a second pass: a final in which the first pass heard
        words (never a partial, never an empty final: no text on silence)."""
        return final.is_final and bool(final.words)

    def clip(self, kept: KeptAudio, final: Result) -> Clip | None:
        """The audio of ``final``'s utterance: from ``context_seconds`` before its speech
        starts (``speech_start``: its first word, or a sound of the segment before it; never
        before the segment) to the segment's end; None when it is no longer kept (an
        utterance longer than ``max_seconds``)."""
        rate = self.sample_rate
        segment, end = round(final.start_time * rate), round(final.end_time * rate)
        first_word = round(final.words[0].start * rate)
        heard = kept.clip(max(segment, kept.first), end)
        if heard is None:  # the segment lies wholly before what is kept
            return None
        onset = max(segment, kept.first) + speech_start(heard, first_word - max(
            segment, kept.first), round(ONSET_FRAME_SECONDS * rate))
        a = max(segment, onset - round(self.config.context_seconds * rate))
        samples = kept.clip(a, end)
        if samples is None or len(samples) == 0:
            return None
        return Clip(samples, a / rate)

    def run(self, final: Result, clip: Clip | None, nbest: int = 1) -> Result:
        """``final`` with the offline model's words (or the first pass's, marked): pure,
        any thread. ``nbest``: the stream's ``SearchConfig.nbest``; above 1, the result
        carries up to that many ``alternatives`` (module notes)."""
        if clip is None:
            return self.mark(final, SKIPPED)
        seconds = len(clip.samples) / self.sample_rate
        out = self.model.transcribe(clip.samples)
        if check_transcript(self.config, out, seconds):
            return self.mark(final, REJECTED)
        result = second_pass_result(final, out, clip.start, final.end_time)
        if nbest <= 1:
            return result
        hyps = self.model.nbest(clip.samples, min(HYPOTHESES_PER_ALTERNATIVE * nbest, MAX_BEAM))
        own = sum(s.avg_logprob for s in out.segments) / len(out.segments)
        return replace(result, alternatives=nbest_alternatives(result, hyps, nbest, own))

    @staticmethod
    def mark(final: Result, status: str) -> Result:
        """``final`` as the first pass made it, marked with ``status``."""
        return replace(final, second_pass=status, first_pass=final)


def second_pass_result(final: Result, out: "OfflineTranscript", offset: float,
                       end_limit: float) -> Result:
    """``final`` carrying ``out``'s words, their times moved by ``offset`` seconds onto the
    stream's clock (and kept within the segment's end ``end_limit``)."""
    shown, raw = [], []
    for w in out.words:
        start = round(min(offset + w.start, end_limit), 3)
        end = round(min(max(offset + w.end, start), end_limit), 3)
        shown.append(Word(w.text, start, end, w.prob))
        parts = raw_style(w.text).split()  # a word of several (ill-disposed) shares its time
        for k, part in enumerate(parts):
            raw.append(Word(part, round(start + (end - start) * k / len(parts), 3),
                            round(start + (end - start) * (k + 1) / len(parts), 3), w.prob))
    log_probs = tuple(round(math.log(max(w.conf, 1e-6)), 6) for w in raw)
    return replace(
        final, text=" ".join(w.text for w in raw), tokens=tuple(w.text for w in raw),
        token_ids=tuple(-1 for _ in raw),
        timestamps=tuple(round(w.start - final.start_time, 6) for w in raw),
        log_probs=log_probs, score=round(sum(log_probs), 6), words=tuple(raw),
        alternatives=(), stable_tokens=len(raw),
        stable_chars=len(" ".join(w.text for w in raw)),
        display=out.text, display_words=tuple(shown), second_pass=DONE, first_pass=final)


def nbest_alternatives(result: Result, hyps: "Sequence[OfflineHypothesis]", n: int,
                       own_score: float) -> tuple[Result, ...]:
    """Up to ``n`` alternatives of distinct raw text, best first: ``result`` (its score the
    best of ``hyps`` reading as it, else ``own_score``), then ``hyps`` (best first) merged by
    raw text, each a result with its text, display text and score, no tokens or words."""
    scores: dict[str, float] = {}
    shown: dict[str, str] = {}
    for h in hyps:
        text = raw_style(h.text)
        if text and text not in scores:  # the first of a text is its best
            scores[text], shown[text] = round(h.score, 6), h.text
    first = replace(result, score=scores.pop(result.text, round(own_score, 6)))
    others = tuple(
        replace(result, text=text, tokens=(), token_ids=(), timestamps=(), log_probs=(),
                score=score, words=(), stable_tokens=0, stable_chars=len(text),
                display=shown[text], display_words=())
        for text, score in list(scores.items())[:n - 1])
    return (first,) + others
