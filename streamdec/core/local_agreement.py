"""Partials refreshed by local agreement: every ``refresh_ms`` of a stream's audio, the open
utterance is decoded again, whole, by the second pass's offline model, and the words that
two consecutive decodes agree on become the stable part of the partial (LocalAgreement-2,
the policy of whisper_streaming). Off by default: it costs one offline decode per refresh
(Whisper: a 30-second window whatever the utterance's length), so it is meant for few
streams (the microphone, the captions page, a connection that asks for it).

Free of I/O and threads, like the second pass: a stream's agreement is one frozen value
(``Agreement``) that the stream holds; ``LocalAgreement`` (shared, stateless) says when a
refresh is due (``due``: the partial's audio reached ``next_at``, and holds a refresh
interval from its first word), clips its audio (``clip``: the stream's thread), decodes it
(``decode``: pure, any thread), merges a decode's words (``agreed``) and makes the partial
to hand out (``shown``). The synchronous loop (``streamdec.core.drive``) refreshes in
place; the engine runs refreshes in the second pass's threads, at most one in flight per
stream and none while those threads are busy (then the refresh is skipped and counted).

The agreement, per utterance (a segment):
- ``committed``: words two consecutive decodes agreed on, in order; it only grows within
  the segment, and it is the partial's stable part (``stable_tokens``/``stable_chars``);
- a decode's words after the committed ones (``after_committed``): its words past the
  committed ones when it starts with them (by text), else those starting after the last
  committed word's end (less ``TOLERANCE_SECONDS``), less a run of one to ``MAX_OVERLAP``
  words at their head that repeats the committed tail;
- ``previous``: the last decode's words after the committed ones; the longest common
  prefix (by text) of those and the new decode's becomes committed, the new decode's rest
  becomes ``previous``.

The partial shown (``shown``): the committed words (the second pass's, in the first pass's
raw style: ``second_pass.raw_style``), stable; then, unstable, the **latest decode's**
words after them (``previous``), then the first pass's words of the same partial whose
middle lies after the last of those: the latest decode is far more accurate than the first
pass, and the first pass's words cover the audio that came since (a decode lags by up to a
refresh and its own decode time). Tokens are words (ids -1, as in a second-pass final),
timestamps their starts from the segment start. The final is the second pass's, as
without local agreement: it may differ from the last partial's stable part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

from .results import Result, Word
from .second_pass import check_transcript, second_pass_result

if TYPE_CHECKING:
    from .second_pass import Clip, KeptAudio, SecondPass

__all__ = ["Agreement", "LocalAgreement", "after_committed", "common_prefix",
           "TOLERANCE_SECONDS", "MAX_OVERLAP"]

#: a decode's word counts as new when it starts after the last committed word's end less
#: this (word times of two decodes differ by a few tens of milliseconds)
TOLERANCE_SECONDS = 0.1
#: the longest run of words at a decode's head dropped as a repeat of the committed tail
MAX_OVERLAP = 5


@dataclass(frozen=True)
class Agreement:
    """One stream's local agreement in its open segment."""

    segment: int = -1  # the segment it is about (-1: none yet)
    committed: tuple[Word, ...] = ()  # agreed: the partial's stable part (only grows)
    previous: tuple[Word, ...] = ()  # the last decode's words after the committed ones
    next_at: float = 0.0  # stream seconds: a refresh is due once a partial's audio reaches it
    runs: int = 0  # decodes merged in this segment


def _texts(words: Sequence[Word]) -> list[str]:
    return [w.text for w in words]


def common_prefix(a: Sequence[Word], b: Sequence[Word]) -> int:
    """How many leading words ``a`` and ``b`` share (by text)."""
    n = 0
    while n < min(len(a), len(b)) and a[n].text == b[n].text:
        n += 1
    return n


def after_committed(committed: Sequence[Word], words: Sequence[Word]) -> tuple[Word, ...]:
    """A decode's ``words`` (the whole open utterance) past the ``committed`` ones (see the
    module notes)."""
    c = len(committed)
    if _texts(words[:c]) == _texts(committed):
        return tuple(words[c:])
    last = committed[-1].end
    new = [w for w in words if w.start > last - TOLERANCE_SECONDS]
    if new and abs(new[0].start - last) < 1.0:
        for n in range(min(MAX_OVERLAP, c, len(new)), 0, -1):
            if _texts(committed[-n:]) == _texts(new[:n]):
                return tuple(new[n:])
    return tuple(new)


class LocalAgreement:
    """Shared by every stream: the second pass (its model, checks and clip) and the refresh
    interval; no per-stream state."""

    def __init__(self, second: "SecondPass") -> None:
        self.second = second
        self.interval = second.config.refresh_ms / 1000

    def state_for(self, state: Agreement | None, partial: Result) -> Agreement:
        """The agreement ``partial`` belongs to: ``state``, or a fresh one when ``partial``
        opens another segment (due at once: its first refresh comes with its first
        words)."""
        if state is not None and state.segment == partial.segment:
            return state
        return Agreement(segment=partial.segment, next_at=partial.start_time)

    def due(self, state: Agreement, partial: Result) -> bool:
        """A refresh is due: ``partial`` has words, its audio reached ``next_at`` and holds
        a refresh interval from its first word on (a decode of less says little)."""
        return bool(partial.words) and partial.end_time >= max(
            state.next_at, partial.words[0].start + self.interval)

    def started(self, state: Agreement, partial: Result) -> Agreement:
        """A refresh over ``partial``'s audio started (or was skipped): the next is due
        ``refresh_ms`` of audio later."""
        return replace(state, next_at=round(partial.end_time + self.interval, 6))

    def run(self, kept: "KeptAudio", partial: Result) -> tuple[Word, ...] | None:
        """``decode`` of ``partial``'s ``clip``, in place."""
        return self.decode(partial, self.clip(kept, partial))

    def clip(self, kept: "KeptAudio", partial: Result) -> "Clip | None":
        """The audio of ``partial``'s utterance so far (the stream's thread: ``kept`` moves
        as audio comes); None when it is no longer kept (too long an utterance)."""
        return self.second.clip(kept, partial)

    def decode(self, partial: Result, clip: "Clip | None") -> tuple[Word, ...] | None:
        """The offline model's words over ``clip`` (pure: any thread), in the first pass's
        raw style on the stream's clock; () when its output fails the second pass's checks;
        None without a clip."""
        if clip is None:
            return None
        out = self.second.model.transcribe(clip.samples)
        if check_transcript(self.second.config, out, len(clip.samples) / self.second.sample_rate):
            return ()
        return second_pass_result(partial, out, clip.start, partial.end_time).words

    def agreed(self, state: Agreement, words: Sequence[Word]) -> Agreement:
        """``state`` after a decode that gave ``words``: the prefix this decode and the
        last agree on is committed."""
        new = after_committed(state.committed, words)
        n = common_prefix(new, state.previous)
        return replace(state, committed=state.committed + new[:n], previous=new[n:],
                       runs=state.runs + 1)

    def shown(self, state: Agreement, partial: Result) -> Result:
        """``partial`` as handed out: the committed words, stable, then the latest decode's
        words after them, then the first pass's words after those (see the module
        notes)."""
        ours = state.committed + state.previous if state.segment == partial.segment else ()
        end = ours[-1].end if ours else -math.inf
        words = ours + tuple(w for w in partial.words if (w.start + w.end) / 2 > end)
        committed = ours[:len(state.committed)]
        stable = " ".join(_texts(committed))
        log_probs = tuple(round(math.log(max(w.conf, 1e-6)), 6) for w in words)
        return replace(
            partial, text=" ".join(_texts(words)), tokens=tuple(_texts(words)),
            token_ids=tuple(-1 for _ in words),
            timestamps=tuple(round(w.start - partial.start_time, 6) for w in words),
            log_probs=log_probs, score=round(sum(log_probs), 6), words=words,
            alternatives=(), stable_tokens=len(committed), stable_chars=len(stable))
