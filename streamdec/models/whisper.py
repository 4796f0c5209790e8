"""Whisper through faster-whisper (CTranslate2) as the second pass's ``OfflineModel``.

    model = WhisperModel(WhisperConfig(model="tiny.en"))
    out = model.transcribe(samples)        # (n,) float32 at 16 kHz -> OfflineTranscript
    hyps = model.nbest(samples, 8)         # up to 8 OfflineHypothesis(text, score)

Decoding is greedy over one temperature (0: the same audio always gives the same words;
no fallback to sampling), with Whisper's own word times, no prompt (nothing of an earlier
utterance is carried into the next unless ``prompt`` is set) and no filter of its own: the
segment's no-speech probability, average log-prob and compression ratio come back with it
for the second pass's checks (``streamdec.core.second_pass``) to judge, so each rule has
one home. ``nbest`` is a beam search of its own over the same audio and initial prompt,
without timestamps, for an n-best only where one is asked (``transcribe`` decodes the best
alone); its scores are CTranslate2's with length penalty 1: a hypothesis's total log-prob
divided by its number of tokens. Whisper's weights: MIT (``streamdec.models.whisper_weights``
says where they come from).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, ModelLoadError
from .offline import OfflineHypothesis, OfflineSegment, OfflineTranscript, OfflineWord
from .whisper_weights import INSTALL, whisper_dir

__all__ = ["WhisperConfig", "WhisperModel", "WHISPER_RATE"]

WHISPER_RATE = 16000
WINDOW_SECONDS = 30  # the audio Whisper decodes at once
COMPUTE_TYPES = ("int8", "int8_float32", "float32", "default")


@dataclass(frozen=True)
class WhisperConfig:
    # a packaged name (tiny.en, base), a name faster-whisper downloaded before, or a folder
    model: str = "tiny.en"
    compute_type: str = "int8"  # CTranslate2's on CPU
    threads: int = 1  # CTranslate2 threads per decode
    beam_size: int = 1  # 1: greedy
    language: str = "en"
    prompt: str = ""  # a fixed initial prompt (empty: none)

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("second_pass: model must name a Whisper model or a folder")
        if self.compute_type not in COMPUTE_TYPES:
            raise ConfigError(f"second_pass: compute_type must be one of {COMPUTE_TYPES}: "
                              f"{self.compute_type!r}")
        if not (1 <= self.threads <= 64 and 1 <= self.beam_size <= 16):
            raise ConfigError("second_pass: threads must be in [1, 64] and beam_size in "
                              f"[1, 16]: {self.threads}, {self.beam_size}")


class WhisperModel:
    """A loaded Whisper model (ModelLoadError when faster-whisper or the weights are
    missing); shared by all streams, ``transcribe`` thread-safe."""

    sample_rate = WHISPER_RATE

    def __init__(self, config: WhisperConfig | None = None, workers: int = 1) -> None:
        self.config = config or WhisperConfig()
        try:
            import faster_whisper
        except ImportError:
            raise ModelLoadError(f"the second pass needs faster-whisper: {INSTALL}") from None
        self.folder = whisper_dir(self.config.model)
        try:
            self._model = faster_whisper.WhisperModel(
                str(self.folder), device="cpu", compute_type=self.config.compute_type,
                cpu_threads=self.config.threads, num_workers=workers, local_files_only=True)
        except Exception as e:  # CTranslate2's own errors: a damaged or foreign folder
            raise ModelLoadError(f"{self.folder}: cannot load the Whisper model: {e}") from e
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        tokenizer = Tokenizer(self._model.hf_tokenizer, self._model.model.is_multilingual,
                              task="transcribe", language=self.config.language)
        self._tokenizer = tokenizer
        previous = tokenizer.encode(" " + self.config.prompt.strip()) if self.config.prompt \
            else []
        # the prompt and suppressed tokens transcribe uses (without timestamps)
        self._nbest_prompt = self._model.get_prompt(tokenizer, previous, without_timestamps=True)
        self._suppressed = get_suppressed_tokens(tokenizer, [-1])
        self.name = f"whisper-{self.config.model}" if "/" not in self.config.model \
            else f"whisper ({self.folder.name})"

    def transcribe(self, samples: np.ndarray) -> OfflineTranscript:
        """Decode ``samples`` ((n,) float32 at 16 kHz): segments with words, times in
        seconds from the first sample."""
        c = self.config
        segments, _ = self._model.transcribe(
            np.ascontiguousarray(samples, dtype=np.float32), language=c.language,
            beam_size=c.beam_size, best_of=1, temperature=0.0,
            compression_ratio_threshold=None, log_prob_threshold=None,
            no_speech_threshold=None, condition_on_previous_text=False,
            initial_prompt=c.prompt or None, word_timestamps=True, vad_filter=False)
        return OfflineTranscript(tuple(
            OfflineSegment(text=s.text, words=tuple(
                OfflineWord(w.word.strip(), round(float(w.start), 3), round(float(w.end), 3),
                            round(float(w.probability), 4)) for w in (s.words or ())
                if w.word.strip()),
                avg_logprob=float(s.avg_logprob), no_speech_prob=float(s.no_speech_prob),
                compression_ratio=float(s.compression_ratio))
            for s in segments))

    def nbest(self, samples: np.ndarray, n: int) -> tuple[OfflineHypothesis, ...]:
        """Up to ``n`` hypotheses of ``samples`` ((k,) float32 at 16 kHz, at most 30 s: else
        none) from a beam search of width ``n``, best first; texts as written, scores
        length-normalised log-probs."""
        from faster_whisper.audio import pad_or_trim

        if len(samples) > WINDOW_SECONDS * WHISPER_RATE or n < 1:
            return ()
        fw = self._model
        features = fw.feature_extractor(np.ascontiguousarray(samples, dtype=np.float32))
        encoded = fw.encode(pad_or_trim(features[..., :-1]))
        out = fw.model.generate(
            encoded, [self._nbest_prompt], beam_size=n, num_hypotheses=n, length_penalty=1,
            max_length=fw.max_length, return_scores=True, suppress_blank=True,
            suppress_tokens=self._suppressed)[0]
        return tuple(OfflineHypothesis(self._tokenizer.decode(ids).strip(), float(score))
                     for ids, score in zip(out.sequences_ids, out.scores))
