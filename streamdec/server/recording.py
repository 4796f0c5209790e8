"""What the server writes to the transcript store (``streamdec.records``): a session's
record when a stream or a call's connection starts, each final with text and each keyword
heard on a call before anyone is sent it, the session's end. One home for these rules;
``Connection`` (streams) and ``CallSession`` (calls) call them.

A session's status at its end: ``failed`` when it ended with an error, ``cut`` when the
server shut down under it (a drain: the platform did not end the call), else ``ended``.
A process killed mid-session leaves it ``running``; the next server to start on the same
host marks it ``cut`` (``Store.cut_orphans``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..core.results import KeywordEvent, Result
from ..records.recorder import Recorder
from ..records.store import Delivery, FinalRecord, KeywordRecord, SessionRecord

__all__ = ["begin_session", "store_final", "store_keyword", "delivery", "keyword_delivery",
           "end_status", "STREAM_ID_HEADER"]

#: the header of an accepted WebSocket stream naming its id in the store
#: (GET /streams/{id}/transcript)
STREAM_ID_HEADER = b"x-streamdec-stream-id"


def begin_session(records: Recorder, engine, kind: str, ref: str | None, protocol: str,
                  metadata: dict[str, Any]) -> str:
    """Queue a session's record; its record id (``ref`` None: the record id names it, as
    for a stream)."""
    record_id = records.new_id()
    config = engine.recognizer.config
    records.begin(SessionRecord(
        record_id=record_id, kind=kind, ref=ref or record_id, protocol=protocol,
        started_at=time.time(), owner=records.owner, metadata=metadata,
        model=config.model.model_dir or "built-in", search=config.search.method))
    return record_id


async def store_final(records: Recorder, record_id: str, leg: str, channel: int,
                      result: Result, webhook: dict[str, Any] | None = None) -> bool:
    """Store ``result`` when it is a final with text (True once committed; False while the
    store fails: it stays queued). Partials and empty finals are not stored (True).
    ``webhook``: a call's message of it, to the outbox in the same transaction (its
    ``idempotency_key`` added: ``delivery``)."""
    if not (result.is_final and result.text):
        return True
    return await records.final(FinalRecord(
        record_id=record_id, leg=leg, channel=channel, segment=result.segment,
        start_time=round(result.start_time, 3), end_time=round(result.end_time, 3),
        text=result.text, words=result.words, display=result.display,
        display_words=result.display_words if result.display is not None else None),
        None if webhook is None else delivery(record_id, channel, webhook))


def delivery(record_id: str, channel: int, message: dict[str, Any]) -> Delivery:
    """A call's final message as an outbox row: its key ``call_id/leg/segment`` (what the
    receiver deduplicates on) in the ``Idempotency-Key`` header and the body."""
    key = f"{message['call_id']}/{message['leg']}/{message['segment']}"
    body = dict(message, idempotency_key=key)
    return Delivery(delivery_id=f"{record_id}:{channel}:{message['segment']}", idem_key=key,
                    call_id=message["call_id"], record_id=record_id,
                    body=json.dumps(body, ensure_ascii=False))


async def store_keyword(records: Recorder, record_id: str, leg: str, channel: int,
                        seq: int, event: KeywordEvent,
                        webhook: dict[str, Any] | None = None) -> bool:
    """Store a keyword heard on a call's leg, the ``seq``-th of that leg (True once
    committed; False while the store fails: it stays queued); ``webhook``: its call
    message, to the outbox in the same transaction (``keyword_delivery``)."""
    return await records.keyword(KeywordRecord(
        record_id=record_id, leg=leg, channel=channel, seq=seq, keyword=event.keyword,
        start_time=round(event.start_time, 3), end_time=round(event.end_time, 3),
        score=round(event.score, 4), tokens=tuple(event.tokens)),
        None if webhook is None else keyword_delivery(record_id, channel, seq, webhook))


def keyword_delivery(record_id: str, channel: int, seq: int,
                     message: dict[str, Any]) -> Delivery:
    """A call's keyword message as an outbox row: its key ``call_id/leg/k<seq>`` (a final's
    is ``call_id/leg/segment``) in the ``Idempotency-Key`` header and the body."""
    key = f"{message['call_id']}/{message['leg']}/k{seq}"
    body = dict(message, idempotency_key=key)
    return Delivery(delivery_id=f"{record_id}:{channel}:k{seq}", idem_key=key,
                    call_id=message["call_id"], record_id=record_id,
                    body=json.dumps(body, ensure_ascii=False))


def end_status(failed: bool, reason: str) -> str:
    if failed:
        return "failed"
    return "cut" if reason == "server shutdown" else "ended"
