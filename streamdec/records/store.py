"""``Store``: the transcript store over SQLite or PostgreSQL (blocking calls: run them in
one thread of their own, ``recorder.Recorder`` does).

    store = Store.open(StoreConfig())          # migrated to ``schema.VERSION``
    store.begin(SessionRecord(...))            # a stream or a call's connection started
    store.add_finals([FinalRecord(...), ...])  # one transaction; a final stored twice is kept once
    store.end(record_id, "ended", reason)      # ended / failed; ``cut_orphans`` marks ``cut``
    store.sessions("call", call_id); store.finals([record_id], from_segment=0)
    store.listing(Query(...))                  # a page of sessions and the next page's cursor
    store.delete("call", call_id, reason)      # erasure, logged in ``deletions``
    store.add_finals(finals, [Delivery(...)])  # finals and their outbox rows, one transaction
    store.add_finals([], deliveries, [KeywordRecord(...)])  # keywords heard, the same way
    store.keywords([record_id])                # a session's keywords, in time order
    store.claim(owner, now, lease, limit)      # due outbox rows, the first of each call
    store.delivered(id, owner) / store.failed(id, owner, error, next_at, dead)
    store.deliveries("dead") / store.replay(id) / store.outbox_counts()

SQLite runs in WAL mode with ``synchronous=FULL`` (a committed final survives a crash of the
process and of the machine), so that every ``--workers`` process can write the same file;
each write is a ``BEGIN IMMEDIATE`` transaction that waits up to ``busy_timeout_ms`` for
another process's. PostgreSQL is reached through psycopg 3 with autocommit and explicit
transactions; a connection that breaks (the server restarted) is dropped and the next
call connects again. Every failure of the database is raised as ``StoreError``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..core.results import Word
from ..errors import StoreError
from .config import StoreConfig
from .schema import MIGRATIONS, VERSION

__all__ = ["Store", "SessionRecord", "FinalRecord", "KeywordRecord", "Query", "Delivery",
           "STATUSES", "KINDS",
           "DELIVERY_STATUSES", "process_owner", "owner_alive"]

STATUSES = ("running", "ended", "failed", "cut")
KINDS = ("call", "stream")
_RECORD_COLUMNS = ("record_id, kind, ref, protocol, status, started_at, ended_at, reason, "
                   "owner, metadata, model, search")
DELIVERY_STATUSES = ("pending", "delivered", "dead")
_OUTBOX_COLUMNS = ("delivery_id, idem_key, call_id, seq, body, status, attempts, next_at, "
                   "since, created_at, delivered_at, last_error, record_id")
_FINAL_COLUMNS = ("record_id, leg, channel, segment, start_time, end_time, text, display, "
                  "words, display_words, stored_at")
_KEYWORD_COLUMNS = ("record_id, leg, channel, seq, keyword, start_time, end_time, score, "
                    "tokens, stored_at")


@dataclass(frozen=True)
class SessionRecord:
    """One session: a stream (``kind`` ``stream``) or one connection of a call."""

    record_id: str
    kind: str
    ref: str  # the call's id, or the stream's id
    protocol: str
    started_at: float  # seconds since the epoch
    owner: str  # the process writing it (``process_owner``)
    metadata: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    search: str = ""
    status: str = "running"
    ended_at: float | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "kind": self.kind, "id": self.ref,
                "protocol": self.protocol, "status": self.status,
                "started_at": self.started_at, "ended_at": self.ended_at,
                "reason": self.reason, "metadata": self.metadata, "model": self.model,
                "search": self.search}


@dataclass(frozen=True)
class FinalRecord:
    """One final of one leg of a session; times in seconds from the session's start."""

    record_id: str
    leg: str
    channel: int
    segment: int
    start_time: float
    end_time: float
    text: str
    words: tuple[Word, ...] = ()
    display: str | None = None  # the formatted text, when the final was formatted
    display_words: tuple[Word, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"record_id": self.record_id, "leg": self.leg, "channel": self.channel,
               "segment": self.segment, "start_time": self.start_time,
               "end_time": self.end_time, "text": self.text, "words": _words_json(self.words)}
        if self.display is not None:
            out.update(display=self.display,
                       display_words=_words_json(self.display_words or ()))
        return out


@dataclass(frozen=True)
class KeywordRecord:
    """One keyword heard on one leg of a session; times in seconds from the session's
    start; ``seq``: the how-manyth keyword of that leg (from 0)."""

    record_id: str
    leg: str
    channel: int
    seq: int
    keyword: str
    start_time: float
    end_time: float
    score: float  # the mean probability of its units
    tokens: tuple[str, ...] = ()  # its units as in tokens.txt

    def to_json(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "leg": self.leg, "channel": self.channel,
                "seq": self.seq, "keyword": self.keyword, "start_time": self.start_time,
                "end_time": self.end_time, "score": self.score, "tokens": list(self.tokens)}


@dataclass(frozen=True)
class Delivery:
    """One outbox row: a final's message to post (``body``, JSON text) with its key."""

    delivery_id: str  # the final's key: ``record_id:channel:segment``
    idem_key: str  # what the receiver deduplicates on: ``call_id/leg/segment``
    call_id: str  # the order group: a call's rows go out one after the other
    body: str
    status: str = "pending"
    attempts: int = 0
    next_at: float = 0.0
    since: float = 0.0
    created_at: float = 0.0
    delivered_at: float | None = None
    last_error: str | None = None
    seq: int = 0
    record_id: str = ""  # the session of its final (deleted with it)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.delivery_id, "key": self.idem_key, "call_id": self.call_id,
                "status": self.status, "attempts": self.attempts, "next_at": self.next_at,
                "since": self.since, "created_at": self.created_at,
                "delivered_at": self.delivered_at, "last_error": self.last_error,
                "body": json.loads(self.body)}


@dataclass(frozen=True)
class Query:
    """A listing's filters: ``kind``, ``status``, sessions started in ``[since, until)``
    (seconds since the epoch), ``metadata`` keys equal to these values (as text); at most
    ``limit`` sessions after ``after`` (a cursor from the previous page)."""

    kind: str | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    limit: int = 100
    after: str | None = None


def _words_json(words: Sequence[Word]) -> list[dict]:
    return [{"word": w.text, "start": w.start, "end": w.end, "conf": w.conf} for w in words]


def _words(text: str | None) -> tuple[Word, ...] | None:
    if text is None:
        return None
    return tuple(Word(w["word"], w["start"], w["end"], w["conf"]) for w in json.loads(text))


def _start_token(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux), None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def process_owner() -> str:
    """This process as a record's owner: ``host:pid:start`` (``start``: when it started, so
    that a pid used again by another process is not taken for it)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_token(pid) or '-'}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process ``owner`` still runs: None when it ran on another host."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname():
        return None
    pid, token = int(parts[1]), parts[2]
    if token != "-":
        return _start_token(pid) == token
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Store:
    """The transcript store (one connection; not for several threads at once)."""

    def __init__(self, backend: str, connect: Callable[[], Any], where: str) -> None:
        self.backend = backend
        self.where = where  # the file or the server, for messages (no password)
        self._connect = connect
        self._conn = None
        self._errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        self._seq = 0  # the last outbox ``seq`` given (microseconds, strictly rising)
        if backend == "postgresql":
            import psycopg

            self._errors = (psycopg.Error,)

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, config: StoreConfig) -> "Store":
        """The store of ``config``, migrated; StoreError when it cannot be opened."""
        if config.backend == "postgresql":
            try:
                import psycopg
            except ImportError:
                raise StoreError("store.url names PostgreSQL: install psycopg 3 "
                                 "(python3 -m pip install -e '.[postgresql]' in the streamdec folder)") from None
            url = config.url

            def connect():
                return psycopg.connect(url, autocommit=True, connect_timeout=5)

            host = url.rpartition("@")[2] if "@" in url else url.partition("://")[2]
            store = cls("postgresql", connect, f"postgresql://{host}")
        else:
            path = config.sqlite_path()
            timeout = config.busy_timeout_ms / 1000

            def connect():
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                return conn

            store = cls("sqlite", connect, str(path))
        store.migrate()
        return store

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.backend == "postgresql" else sql

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Callable[..., Any]]:
        """A transaction; yields ``run(sql, params)`` -> the cursor. Errors -> StoreError,
        and a broken connection is dropped (the next call connects again)."""
        try:
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            if self.backend == "sqlite":
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield lambda sql, params=(): conn.execute(sql, params)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            else:
                with conn.transaction():
                    cur = conn.cursor()

                    def run(sql, params=()):
                        cur.execute(self._sql(sql), params)
                        return cur
                    yield run
        except self._errors as e:
            self._drop()
            raise StoreError(f"transcript store {self.where}: {type(e).__name__}: "
                             f"{str(e).strip() or 'failed'}") from None
        except OSError as e:
            self._drop()
            raise StoreError(f"transcript store {self.where}: {e}") from None

    def _drop(self) -> None:
        if self.backend == "postgresql" or (self._conn is not None and
                                            self._conn.in_transaction):
            self.close()

    def migrate(self) -> int:
        """Bring the tables to ``VERSION``; the version found before. StoreError for a store
        written by a newer streamdec."""
        with self._transaction() as run:
            run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            if self.backend == "postgresql":  # one process migrates at a time
                run("LOCK TABLE schema_version IN EXCLUSIVE MODE")
            found = run("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
            if found > VERSION:
                raise StoreError(f"transcript store {self.where} is at schema version "
                                 f"{found}, newer than this streamdec's {VERSION}")
            for version, statements in MIGRATIONS:
                if version > found:
                    for statement in statements:
                        run(statement)
                    run("INSERT INTO schema_version (version) VALUES (?)", (version,))
        return found

    def version(self) -> int:
        with self._transaction() as run:
            return run("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0

    # -- writing -----------------------------------------------------------------------------
    def begin(self, record: SessionRecord) -> None:
        """Write a session's record (written again, it is kept as first written)."""
        with self._transaction() as run:
            run(f"INSERT INTO records ({_RECORD_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (record_id) DO NOTHING",
                (record.record_id, record.kind, record.ref, record.protocol, record.status,
                 record.started_at, record.ended_at, record.reason, record.owner,
                 json.dumps(record.metadata, ensure_ascii=False, default=str),
                 record.model, record.search))

    def add_finals(self, finals: Sequence[FinalRecord],
                   deliveries: Sequence[Delivery] = (),
                   keywords: Sequence[KeywordRecord] = ()) -> int:
        """Write finals and keywords heard, and the outbox rows of those to deliver, in one
        transaction; how many finals were new (a final already stored, by its
        ``(record_id, channel, segment)``, is left as it was; so is a keyword by its
        ``(record_id, channel, seq)`` and a delivery by its id). The deliveries are
        ordered (``seq``) as given."""
        now = time.time()
        added = 0
        with self._transaction() as run:
            for d in deliveries:
                self._seq = max(self._seq + 1, time.time_ns() // 1000)
                run(f"INSERT INTO outbox ({_OUTBOX_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT (delivery_id) DO NOTHING",
                    (d.delivery_id, d.idem_key, d.call_id, self._seq, d.body, "pending", 0,
                     now, now, now, None, None, d.record_id))
            for f in finals:
                cur = run(f"INSERT INTO finals ({_FINAL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                          "ON CONFLICT (record_id, channel, segment) DO NOTHING",
                          (f.record_id, f.leg, f.channel, f.segment, f.start_time, f.end_time,
                           f.text, f.display, json.dumps(_words_json(f.words)),
                           None if f.display_words is None
                           else json.dumps(_words_json(f.display_words)), now))
                added += max(cur.rowcount, 0)
            for k in keywords:
                run(f"INSERT INTO keywords ({_KEYWORD_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT (record_id, channel, seq) DO NOTHING",
                    (k.record_id, k.leg, k.channel, k.seq, k.keyword, k.start_time,
                     k.end_time, k.score, json.dumps(list(k.tokens), ensure_ascii=False),
                     now))
        return added

    def end(self, record_id: str, status: str, reason: str, ended_at: float | None = None
            ) -> None:
        """A session ended (``ended``, ``failed``); a record already ended is left."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        with self._transaction() as run:
            run("UPDATE records SET status = ?, reason = ?, ended_at = ? "
                "WHERE record_id = ? AND status = 'running'",
                (status, reason, ended_at if ended_at is not None else time.time(), record_id))

    def cut_orphans(self, alive: Callable[[str], bool | None] = owner_alive) -> list[str]:
        """Mark ``cut`` the running sessions whose process is gone (``alive(owner)`` False;
        None: another host's, left alone); their ids."""
        with self._transaction() as run:
            rows = run("SELECT record_id, owner FROM records WHERE status = 'running'"
                       ).fetchall()
            gone = [r for r, owner in rows if alive(owner) is False]
            now = time.time()
            for record_id in gone:
                run("UPDATE records SET status = 'cut', reason = ?, ended_at = ? "
                    "WHERE record_id = ? AND status = 'running'",
                    ("the process holding it stopped", now, record_id))
        return gone

    # -- reading -----------------------------------------------------------------------------
    def sessions(self, kind: str, ref: str) -> list[SessionRecord]:
        """The sessions of a call (or the one of a stream), oldest first."""
        with self._transaction() as run:
            rows = run(f"SELECT {_RECORD_COLUMNS} FROM records WHERE kind = ? AND ref = ? "
                       "ORDER BY started_at, record_id", (kind, ref)).fetchall()
        return [_record(r) for r in rows]

    def finals(self, record_ids: Sequence[str], from_segment: int = 0) -> list[FinalRecord]:
        """The finals of these sessions from segment ``from_segment`` on, in time order."""
        if not record_ids:
            return []
        marks = ",".join("?" * len(record_ids))
        with self._transaction() as run:
            rows = run(f"SELECT {_FINAL_COLUMNS} FROM finals WHERE record_id IN ({marks}) "
                       "AND segment >= ? ORDER BY start_time, channel, segment",
                       (*record_ids, from_segment)).fetchall()
        return [FinalRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], _words(r[8]) or (),
                            r[7], _words(r[9])) for r in rows]

    def keywords(self, record_ids: Sequence[str]) -> list[KeywordRecord]:
        """The keywords heard in these sessions, in time order."""
        if not record_ids:
            return []
        marks = ",".join("?" * len(record_ids))
        with self._transaction() as run:
            rows = run(f"SELECT {_KEYWORD_COLUMNS} FROM keywords WHERE record_id IN ({marks}) "
                       "ORDER BY start_time, channel, seq", tuple(record_ids)).fetchall()
        return [KeywordRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                              tuple(json.loads(r[8]))) for r in rows]

    def listing(self, query: Query) -> tuple[list[SessionRecord], str | None]:
        """A page of sessions (oldest first) and the cursor of the next page (None: last)."""
        where, params = [], []
        if query.kind is not None:
            where.append("kind = ?")
            params.append(query.kind)
        if query.status is not None:
            where.append("status = ?")
            params.append(query.status)
        if query.since is not None:
            where.append("started_at >= ?")
            params.append(query.since)
        if query.until is not None:
            where.append("started_at < ?")
            params.append(query.until)
        for key, value in query.metadata:  # "customParameters.agent": a nested key
            parts = [part.replace('"', "") for part in key.split(".")]
            if self.backend == "postgresql":
                where.append("(metadata::jsonb #>> ?) = ?")
                params += [parts, value]
            else:
                where.append("CAST(json_extract(metadata, ?) AS TEXT) = ?")
                params += ["$" + "".join(f'."{part}"' for part in parts), value]
        if query.after is not None:
            started, record_id = _cursor(query.after)
            where.append("(started_at > ? OR (started_at = ? AND record_id > ?))")
            params += [started, started, record_id]
        sql = f"SELECT {_RECORD_COLUMNS} FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at, record_id LIMIT ?"
        params.append(query.limit + 1)
        with self._transaction() as run:
            rows = run(sql, tuple(params)).fetchall()
        records = [_record(r) for r in rows[:query.limit]]
        more = len(rows) > query.limit
        return records, (f"{records[-1].started_at!r}|{records[-1].record_id}"
                         if more and records else None)

    def deletions(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._transaction() as run:
            rows = run("SELECT deleted_at, kind, ref, records, finals, reason FROM deletions "
                       "ORDER BY deleted_at DESC LIMIT ?", (limit,)).fetchall()
        return [dict(zip(("deleted_at", "kind", "id", "records", "finals", "reason"), r))
                for r in rows]

    # -- the outbox -------------------------------------------------------------------------
    def claim(self, owner: str, now: float, lease: float, limit: int) -> list[Delivery]:
        """Lease to ``owner`` until ``now + lease`` at most ``limit`` due rows: pending,
        ``next_at`` passed, not leased (or the lease expired), and the first pending row
        of their call (a call's next row waits for the one before)."""
        with self._transaction() as run:
            rows = run(f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE status = 'pending' "
                       "AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?) "
                       "AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.call_id = o.call_id "
                       "AND p.status = 'pending' AND p.seq < o.seq) ORDER BY seq LIMIT ?",
                       (now, now, limit)).fetchall()
            taken = []
            for r in rows:
                cur = run("UPDATE outbox SET lease_owner = ?, lease_until = ? "
                          "WHERE delivery_id = ? AND status = 'pending' "
                          "AND (lease_until IS NULL OR lease_until < ?)",
                          (owner, now + lease, r[0], now))
                if cur.rowcount == 1:
                    taken.append(_delivery(r))
        return taken

    def delivered(self, delivery_id: str, owner: str, now: float | None = None) -> bool:
        """The receiver acknowledged it: ``delivered`` (False: ``owner`` no longer held it)."""
        with self._transaction() as run:
            cur = run("UPDATE outbox SET status = 'delivered', delivered_at = ?, "
                      "attempts = attempts + 1, lease_owner = NULL, lease_until = NULL "
                      "WHERE delivery_id = ? AND lease_owner = ? AND status = 'pending'",
                      (time.time() if now is None else now, delivery_id, owner))
            return cur.rowcount == 1

    def failed(self, delivery_id: str, owner: str, error: str, next_at: float,
               dead: bool) -> bool:
        """An attempt failed: tried again at ``next_at``, or ``dead`` (its retention has
        passed); the lease is let go."""
        with self._transaction() as run:
            cur = run("UPDATE outbox SET status = ?, attempts = attempts + 1, next_at = ?, "
                      "last_error = ?, lease_owner = NULL, lease_until = NULL "
                      "WHERE delivery_id = ? AND lease_owner = ? AND status = 'pending'",
                      ("dead" if dead else "pending", next_at, error[:500], delivery_id,
                       owner))
            return cur.rowcount == 1

    def deliveries(self, status: str | None = None, limit: int = 100,
                   after: int = 0) -> list[Delivery]:
        """Outbox rows (of ``status``), in order (``seq`` after ``after``)."""
        where, params = "seq > ?", [after]
        if status is not None:
            where += " AND status = ?"
            params.append(status)
        with self._transaction() as run:
            rows = run(f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE {where} "
                       "ORDER BY seq LIMIT ?", (*params, limit)).fetchall()
        return [_delivery(r) for r in rows]

    def replay(self, delivery_id: str, now: float | None = None) -> bool:
        """A dead row back to ``pending``, due now, with a new retention (False: no dead
        row has that id)."""
        now = time.time() if now is None else now
        with self._transaction() as run:
            cur = run("UPDATE outbox SET status = 'pending', attempts = 0, next_at = ?, "
                      "since = ?, lease_owner = NULL, lease_until = NULL "
                      "WHERE delivery_id = ? AND status = 'dead'", (now, now, delivery_id))
            return cur.rowcount == 1

    def outbox_counts(self) -> dict[str, int]:
        """Rows by status (every status, 0 when none)."""
        with self._transaction() as run:
            rows = run("SELECT status, COUNT(*) FROM outbox GROUP BY status").fetchall()
        counts = dict.fromkeys(DELIVERY_STATUSES, 0)
        counts.update({status: int(n) for status, n in rows})
        return counts

    # -- deleting ----------------------------------------------------------------------------
    def delete(self, kind: str, ref: str, reason: str) -> tuple[int, int]:
        """Delete a call's (or a stream's) sessions, finals and keywords, and log it in
        ``deletions``: (sessions, finals) deleted."""
        with self._transaction() as run:
            ids = [r[0] for r in run("SELECT record_id FROM records WHERE kind = ? AND ref = ?",
                                     (kind, ref)).fetchall()]
            if not ids:
                return 0, 0
            finals = self._delete_ids(run, ids)
            run("INSERT INTO deletions (deleted_at, kind, ref, records, finals, reason) "
                "VALUES (?,?,?,?,?,?)", (time.time(), kind, ref, len(ids), finals, reason))
        return len(ids), finals

    def purge(self, before: float) -> tuple[int, int]:
        """Delete the sessions that started before ``before`` (and are not running), logged
        in ``deletions`` as one ``retention`` entry: (sessions, finals) deleted."""
        with self._transaction() as run:
            ids = [r[0] for r in run("SELECT record_id FROM records WHERE started_at < ? "
                                     "AND status <> 'running'", (before,)).fetchall()]
            if not ids:
                return 0, 0
            finals = self._delete_ids(run, ids)
            run("INSERT INTO deletions (deleted_at, kind, ref, records, finals, reason) "
                "VALUES (?,?,?,?,?,?)", (time.time(), "retention", f"before {before:.0f}",
                                         len(ids), finals, "retention"))
        return len(ids), finals

    @staticmethod
    def _delete_ids(run, ids: list[str]) -> int:
        finals = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            finals += max(run(f"DELETE FROM finals WHERE record_id IN ({marks})",
                              tuple(chunk)).rowcount, 0)
            run(f"DELETE FROM outbox WHERE record_id IN ({marks})", tuple(chunk))
            run(f"DELETE FROM keywords WHERE record_id IN ({marks})", tuple(chunk))
            run(f"DELETE FROM records WHERE record_id IN ({marks})", tuple(chunk))
        return finals


def _record(row) -> SessionRecord:
    return SessionRecord(record_id=row[0], kind=row[1], ref=row[2], protocol=row[3],
                         status=row[4], started_at=row[5], ended_at=row[6], reason=row[7],
                         owner=row[8], metadata=json.loads(row[9]), model=row[10],
                         search=row[11])


def _delivery(row) -> Delivery:
    return Delivery(delivery_id=row[0], idem_key=row[1], call_id=row[2], seq=int(row[3]),
                    body=row[4], status=row[5], attempts=int(row[6]), next_at=row[7],
                    since=row[8], created_at=row[9], delivered_at=row[10], last_error=row[11],
                    record_id=row[12])


def _cursor(text: str) -> tuple[float, str]:
    started, sep, record_id = text.partition("|")
    try:
        if not sep:
            raise ValueError
        return float(started), record_id
    except ValueError:
        raise ValueError(f"not a cursor of this listing: {text!r}") from None
