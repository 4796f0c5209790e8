"""The store's tables and their migrations, one list of statements per schema version.

A store at version ``v`` runs the statements of every version after ``v`` in order, each
version in one transaction, then records it in ``schema_version``; a store newer than
this code (a version past ``VERSION``) is refused rather than written. The SQL is the
common part of SQLite's and PostgreSQL's dialects (``DOUBLE PRECISION``, ``TEXT``,
``INTEGER``); JSON is kept as text.

Tables (version 1):

- ``records``: one per session: a WebSocket stream (``kind`` ``stream``, ``ref`` its id)
  or one connection of a call (``kind`` ``call``, ``ref`` the call's id; several sessions
  may share a call id, one per Twilio track); ``status`` ``running`` / ``ended`` /
  ``failed`` / ``cut`` (its process stopped mid-session), ``owner`` the process that wrote
  it (``host:pid:start``), ``metadata`` what the platform or the client said (JSON);
- ``finals``: one per final of a session's leg: ``(record_id, channel, segment)`` is its
  key (written twice, it is stored once), raw and formatted text, words with times
  (seconds from the session's start) and confidences (JSON);
- ``deletions``: what was deleted, when and why (by id, or by the retention purge);
- ``schema_version``: the version the tables are at.

Version 2 adds ``outbox``: one row per final to deliver (the webhook), written in the
same transaction as its final; ``delivery_id`` is the final's key
(``record_id:channel:segment``; ``record_id`` its session), ``idem_key`` what the
receiver deduplicates on (``call id/leg/segment``), ``call_id`` the order group (``seq`` orders a call's rows),
``status`` ``pending`` / ``delivered`` / ``dead``, ``attempts`` and ``next_at`` the
back-off, ``since`` when the row's retention started (its creation, or its last replay),
``lease_owner`` / ``lease_until`` the deliverer holding it (expired: free again).

Version 3 adds ``keywords``: one row per keyword heard on a leg of a session (a call that
spots keywords), written before anyone is sent it: ``(record_id, channel, seq)`` is its key
(``seq``: the how-manyth keyword of that leg, from 0; written twice, it is stored once), the
keyword's text, its times (seconds from the session's start), its score (the mean
probability of its units) and its units (JSON). Its outbox row, when the webhook gets it,
has the key ``record_id:channel:k<seq>``.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "VERSION"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        """CREATE TABLE records (
            record_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            protocol TEXT NOT NULL,
            status TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            reason TEXT,
            owner TEXT NOT NULL,
            metadata TEXT NOT NULL,
            model TEXT NOT NULL,
            search TEXT NOT NULL)""",
        "CREATE INDEX records_ref ON records (kind, ref)",
        "CREATE INDEX records_started ON records (started_at, record_id)",
        "CREATE INDEX records_status ON records (status)",
        """CREATE TABLE finals (
            record_id TEXT NOT NULL,
            leg TEXT NOT NULL,
            channel INTEGER NOT NULL,
            segment INTEGER NOT NULL,
            start_time DOUBLE PRECISION NOT NULL,
            end_time DOUBLE PRECISION NOT NULL,
            text TEXT NOT NULL,
            display TEXT,
            words TEXT NOT NULL,
            display_words TEXT,
            stored_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (record_id, channel, segment))""",
        """CREATE TABLE deletions (
            deleted_at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            records INTEGER NOT NULL,
            finals INTEGER NOT NULL,
            reason TEXT NOT NULL)""",
    )),
    (2, (
        """CREATE TABLE outbox (
            delivery_id TEXT PRIMARY KEY,
            record_id TEXT NOT NULL,
            idem_key TEXT NOT NULL,
            call_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            body TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            next_at DOUBLE PRECISION NOT NULL,
            since DOUBLE PRECISION NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            delivered_at DOUBLE PRECISION,
            last_error TEXT,
            lease_owner TEXT,
            lease_until DOUBLE PRECISION)""",
        "CREATE INDEX outbox_due ON outbox (status, next_at)",
        "CREATE INDEX outbox_call ON outbox (call_id, status, seq)",
        "CREATE INDEX outbox_record ON outbox (record_id)",
    )),
    (3, (
        """CREATE TABLE keywords (
            record_id TEXT NOT NULL,
            leg TEXT NOT NULL,
            channel INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            keyword TEXT NOT NULL,
            start_time DOUBLE PRECISION NOT NULL,
            end_time DOUBLE PRECISION NOT NULL,
            score DOUBLE PRECISION NOT NULL,
            tokens TEXT NOT NULL,
            stored_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (record_id, channel, seq))""",
    )),
)

VERSION = MIGRATIONS[-1][0]
