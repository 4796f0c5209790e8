"""A stored transcript: the sessions of a call (or a stream), their finals and the keywords
heard, merged onto one timeline, as JSON or as results the output formats take (pure: no
I/O).

Each session's times are seconds from its own start; the finals and keywords of a call with
several sessions (one Twilio ``<Stream>`` per track) are shifted by how much later their
session started than the first, then ordered by start time (then channel, segment or seq).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..core.results import Result, Word
from .store import FinalRecord, KeywordRecord, SessionRecord

__all__ = ["Transcript", "call_status"]


def call_status(sessions: Sequence[SessionRecord]) -> str:
    """One status for a call's sessions: ``running`` while any runs, else ``cut`` when any
    was cut, else ``failed`` when any failed, else ``ended``."""
    statuses = {s.status for s in sessions}
    for status in ("running", "cut", "failed"):
        if status in statuses:
            return status
    return "ended"


def _shift(words: Sequence[Word], by: float) -> tuple[Word, ...]:
    return tuple(Word(w.text, w.start + by, w.end + by, w.conf) for w in words)


@dataclass(frozen=True)
class Transcript:
    kind: str
    ref: str
    sessions: tuple[SessionRecord, ...]
    finals: tuple[FinalRecord, ...]  # on the first session's timeline, in time order
    keywords: tuple[KeywordRecord, ...] = ()  # the same

    @classmethod
    def merge(cls, kind: str, ref: str, sessions: Sequence[SessionRecord],
              finals: Sequence[FinalRecord], keywords: Sequence[KeywordRecord] = ()
              ) -> "Transcript":
        """``finals`` and ``keywords`` of ``sessions`` (oldest first) on the first
        session's timeline."""
        origin = sessions[0].started_at if sessions else 0.0
        offsets = {s.record_id: s.started_at - origin for s in sessions}
        moved = []
        for f in finals:
            by = offsets.get(f.record_id, 0.0)
            if by:
                f = replace(f, start_time=f.start_time + by, end_time=f.end_time + by,
                            words=_shift(f.words, by),
                            display_words=None if f.display_words is None
                            else _shift(f.display_words, by))
            moved.append(f)
        moved.sort(key=lambda f: (f.start_time, f.channel, f.segment))
        heard = [replace(k, start_time=k.start_time + offsets.get(k.record_id, 0.0),
                         end_time=k.end_time + offsets.get(k.record_id, 0.0))
                 if offsets.get(k.record_id, 0.0) else k for k in keywords]
        heard.sort(key=lambda k: (k.start_time, k.channel, k.seq))
        return cls(kind, ref, tuple(sessions), tuple(moved), tuple(heard))

    @property
    def status(self) -> str:
        return call_status(self.sessions)

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "id", "status", "sessions": [...], "finals": [...], "keywords":
        [...]}``; times of the finals and keywords in seconds from the first session's
        start (``started_at``, epoch seconds)."""
        return {"kind": self.kind, "id": self.ref, "status": self.status,
                "started_at": self.sessions[0].started_at if self.sessions else None,
                "sessions": [s.to_json() for s in self.sessions],
                "finals": [f.to_json() for f in self.finals],
                "keywords": [k.to_json() for k in self.keywords]}

    def results(self) -> list[Result]:
        """The finals as final ``Result`` objects (text, words, formatted text), for the
        output formats (``streamdec.files.formats``)."""
        return [Result(text=f.text, tokens=(), token_ids=(), timestamps=(), log_probs=(),
                       segment=f.segment, start_time=f.start_time, end_time=f.end_time,
                       is_final=True, words=f.words, display=f.display,
                       display_words=f.display_words or ()) for f in self.finals]
