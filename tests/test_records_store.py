"""The transcript store (``streamdec.records``) on both of its databases: SQLite (a file
in a temporary folder) and a real PostgreSQL server from Debian's package, started here
(``postgres_utils``). Every case runs on both, listed explicitly:

- a new store is migrated to the current schema version; opened again it keeps its rows;
  a store of a newer version is refused with ``StoreError``;
- a session and its finals read back exactly (texts, words with times and confidences,
  formatted text), and a final written twice is stored once;
- keywords heard read back exactly, in time order, a keyword written twice is stored once,
  a store of version 2 keeps its rows when it is migrated to keywords, and deleting a call
  deletes its keywords;
- sessions of a process that is gone are marked ``cut``; those of a live process and of
  another host are left ``running``;
- the listing filters by kind, status, time and (nested) metadata and pages through every
  session once;
- deleting a call removes its sessions and finals and logs the deletion; the retention
  purge deletes old sessions that are not running;
- the ``Recorder`` commits finals before answering, and while the database is down (the
  PostgreSQL server stopped) keeps them queued, says so in ``health()``, and writes them
  all, once, when it is back.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import time

import pytest

from postgres_utils import PostgresServer
from streamdec.core.results import Word
from streamdec.errors import StoreError
from streamdec.records import FinalRecord, Query, Recorder, SessionRecord, Store, StoreConfig
from streamdec.records.schema import MIGRATIONS, VERSION
from streamdec.records.store import KeywordRecord, owner_alive, process_owner
from streamdec.records.transcript import Transcript

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as pg:
        yield pg


@pytest.fixture(params=BACKENDS)
def config(request, tmp_path):
    if request.param == "sqlite":
        return StoreConfig(url=f"sqlite:///{tmp_path}/t.sqlite3")
    return StoreConfig(url=request.getfixturevalue("postgres").new_database("t"))


def session(record_id="r1", ref="CA1", kind="call", started=1000.0, owner=None, **meta):
    return SessionRecord(record_id=record_id, kind=kind, ref=ref, protocol="twilio",
                         started_at=started, owner=owner or process_owner(),
                         metadata=meta, model="built-in", search="greedy")


WORDS = (Word("my", 0.52, 0.68, 0.91), Word("card", 0.68, 1.04, 0.875))


def final(record_id="r1", segment=0, channel=0, text="my card", start=0.5):
    return FinalRecord(record_id=record_id, leg="inbound", channel=channel, segment=segment,
                       start_time=start, end_time=start + 0.6, text=text, words=WORDS,
                       display="My card.", display_words=(Word("My", 0.52, 0.68, 0.91),
                                                          Word("card.", 0.68, 1.04, 0.875)))


def test_a_new_store_is_migrated_and_keeps_its_rows_when_opened_again(config):
    store = Store.open(config)
    assert store.version() == VERSION == 3
    store.begin(session())
    store.close()
    again = Store.open(config)
    assert again.migrate() == VERSION  # nothing left to run
    assert [s.record_id for s in again.sessions("call", "CA1")] == ["r1"]
    again.close()


def test_a_store_of_a_newer_schema_is_refused(config):
    store = Store.open(config)
    with store._transaction() as run:
        run("INSERT INTO schema_version (version) VALUES (?)", (VERSION + 1,))
    store.close()
    with pytest.raises(StoreError, match=f"schema version {VERSION + 1}, newer than this "
                                         f"streamdec's {VERSION}"):
        Store.open(config)


def test_finals_read_back_exactly_and_a_final_written_twice_is_stored_once(config):
    store = Store.open(config)
    store.begin(session(customParameters={"agent": "7"}))
    store.begin(session())  # again: kept as first written
    assert store.add_finals([final(segment=0), final(segment=1, start=2.0)]) == 2
    assert store.add_finals([final(segment=1, start=2.0, text="other")]) == 0
    got = store.finals(["r1"])
    assert got == [final(segment=0), final(segment=1, start=2.0)]
    assert store.finals(["r1"], from_segment=1) == [final(segment=1, start=2.0)]
    (s,) = store.sessions("call", "CA1")
    assert (s.status, s.metadata, s.ended_at) == ("running", {"customParameters":
                                                              {"agent": "7"}}, None)
    store.end("r1", "ended", "stop", ended_at=1010.0)
    store.end("r1", "failed", "late")  # an ended session stays as it ended
    (s,) = store.sessions("call", "CA1")
    assert (s.status, s.reason, s.ended_at) == ("ended", "stop", 1010.0)
    store.close()


def keyword(record_id="r1", seq=0, channel=0, start=0.96, word="ALEXA"):
    return KeywordRecord(record_id=record_id, leg=("inbound", "outbound")[channel],
                         channel=channel, seq=seq, keyword=word, start_time=start,
                         end_time=start + 0.44, score=0.5173,
                         tokens=("\u2581A", "LE", "X", "A"))


def test_keywords_read_back_exactly_and_a_store_of_version_2_keeps_its_rows(config):
    store = Store.open(config)
    with store._transaction() as run:  # a store as streamdec wrote it before keywords
        for statement in MIGRATIONS[-1][1]:
            run("DROP TABLE " + statement.split()[2])
        run("DELETE FROM schema_version WHERE version = ?", (VERSION,))
    store.begin(session())
    store.add_finals([final(segment=0)])
    store.close()
    store = Store.open(config)
    assert store.version() == VERSION and store.finals(["r1"]) == [final(segment=0)]
    kept = [keyword(seq=0, start=2.5), keyword(seq=1, start=4.0),
            keyword(seq=0, channel=1, start=1.0, word="JARVIS")]
    store.add_finals([], (), kept[:2])
    store.add_finals([final(segment=1, start=3.0)], (), kept[2:] + [keyword(seq=1, start=9.0,
                                                                           word="OTHER")])
    assert store.keywords(["r1"]) == [kept[2], kept[0], kept[1]]  # time order, once each
    assert store.keywords(["r1"])[0].to_json() == {
        "record_id": "r1", "leg": "outbound", "channel": 1, "seq": 0, "keyword": "JARVIS",
        "start_time": 1.0, "end_time": 1.44, "score": 0.5173,
        "tokens": ["\u2581A", "LE", "X", "A"]}
    assert store.delete("call", "CA1", "erasure request") == (1, 2)
    assert store.keywords(["r1"]) == []
    store.close()


def test_sessions_of_a_process_that_is_gone_are_marked_cut(config):
    store = Store.open(config)
    host = socket.gethostname()
    dead = f"{host}:999999999:1"
    store.begin(session("alive"))
    store.begin(session("dead", owner=dead))
    store.begin(session("elsewhere", owner="another-host.example:1:1"))
    assert owner_alive(process_owner()) is True
    assert (owner_alive(dead), owner_alive("another-host.example:1:1")) == (False, None)
    assert store.cut_orphans() == ["dead"]
    statuses = {s.record_id: s.status for s in store.sessions("call", "CA1")}
    assert statuses == {"alive": "running", "dead": "cut", "elsewhere": "running"}
    store.close()


def test_the_listing_filters_and_pages_through_every_session_once(config):
    store = Store.open(config)
    for n in range(7):
        store.begin(session(f"r{n}", ref=f"CA{n % 3}", kind=("call", "stream")[n % 2],
                            started=1000.0 + n, customParameters={"agent": str(n % 2)}))
    store.end("r3", "ended", "stop")
    ids = lambda page: [s.record_id for s in page[0]]  # noqa: E731
    assert ids(store.listing(Query(kind="stream"))) == ["r1", "r3", "r5"]
    assert ids(store.listing(Query(status="ended"))) == ["r3"]
    assert ids(store.listing(Query(since=1002.0, until=1004.0))) == ["r2", "r3"]
    assert ids(store.listing(Query(metadata=(("customParameters.agent", "1"),)))) == [
        "r1", "r3", "r5"]
    seen, cursor, pages = [], None, 0
    while True:
        page, cursor = store.listing(Query(limit=3, after=cursor))
        seen += [s.record_id for s in page]
        pages += 1
        if cursor is None:
            break
    assert (seen, pages) == ([f"r{n}" for n in range(7)], 3)
    store.close()


def test_deleting_a_call_removes_it_and_logs_the_deletion_and_the_purge_keeps_running_ones(
        config):
    store = Store.open(config)
    store.begin(session("a", ref="CA-del"))
    store.begin(session("b", ref="CA-del", started=1001.0))
    store.add_finals([final("a", 0), final("a", 1), final("b", 0)])
    assert store.delete("call", "CA-del", "erasure request") == (2, 3)
    assert store.sessions("call", "CA-del") == [] and store.finals(["a", "b"]) == []
    assert store.delete("call", "CA-del", "again") == (0, 0)
    (logged,) = store.deletions()
    assert {k: logged[k] for k in ("kind", "id", "records", "finals", "reason")} == {
        "kind": "call", "id": "CA-del", "records": 2, "finals": 3, "reason": "erasure request"}
    store.begin(session("old", started=10.0))
    store.end("old", "ended", "stop")
    store.begin(session("old-running", started=11.0))
    store.begin(session("new", started=time.time()))
    store.add_finals([final("old", 0)])
    assert store.purge(before=time.time() - 86400) == (1, 1)
    left = {s.record_id for s in store.listing(Query())[0]}
    assert left == {"old-running", "new"}
    assert store.deletions()[0]["reason"] == "retention"
    store.close()


def test_a_transcript_merges_the_sessions_of_a_call_onto_one_timeline():
    a = session("a", started=1000.0)
    b = session("b", started=1000.25)
    merged = Transcript.merge("call", "CA1", [a, b], [final("a", 0, start=1.0),
                                                      final("b", 0, channel=1, start=0.5)])
    assert [(f.record_id, f.start_time, f.words[0].start) for f in merged.finals] == [
        ("b", 0.75, 0.77), ("a", 1.0, 0.52)]
    assert merged.status == "running"
    heard = Transcript.merge("call", "CA1", [a, b], [], [keyword("a", start=1.0),
                                                         keyword("b", channel=1, start=0.5)])
    assert [(k.record_id, k.start_time, k.end_time) for k in heard.keywords] == [
        ("b", 0.75, 1.19), ("a", 1.0, 1.44)]
    assert [k["keyword"] for k in heard.to_json()["keywords"]] == ["ALEXA", "ALEXA"]


def test_the_recorder_commits_before_answering_and_keeps_finals_while_the_database_is_down(
        postgres):
    import psycopg
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE recorder")
    config = StoreConfig(url=postgres.url.rpartition("/")[0] + "/recorder")

    async def main():
        recorder = Recorder.open(config)
        recorder.start()
        recorder.begin(session("r"))
        assert await recorder.final(final("r", 0)) is True
        assert len(recorder.store.finals(["r"])) == 1  # committed before the answer
        postgres.stop()
        try:
            answers = [await recorder.final(final("r", n)) for n in range(1, 6)]
            await asyncio.sleep(0.5)
            health = recorder.health()
        finally:
            postgres.start()
        assert answers[0] is False and set(answers) == {False}
        assert health["status"] == "error" and health["backlog"] == 5, health
        deadline = time.monotonic() + 20
        while recorder.health()["backlog"] and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert recorder.health() == {"status": "ok", "backend": "postgresql", "backlog": 0}
        recorder.end("r", "ended", "stop")
        await recorder.close()
        return Store.open(config)

    store = asyncio.run(main())
    assert [f.segment for f in store.finals(["r"])] == [0, 1, 2, 3, 4, 5]
    assert store.sessions("call", "CA1")[0].status == "ended"
    store.close()


def test_a_store_config_names_a_usable_url():
    from streamdec.errors import ConfigError
    for url, message in [("mysql://x", "expected sqlite:///PATH or postgresql://"),
                         ("sqlite://", "names no file"), ("sqlite:///", "names no file")]:
        with pytest.raises(ConfigError, match=message):
            StoreConfig(url=url)
    with pytest.raises(ConfigError, match="retention_days must be >= 0"):
        StoreConfig(retention_days=-1)
    assert StoreConfig(url="postgres://h/db").backend == "postgresql"
    assert str(StoreConfig(url="sqlite:////var/t.db").sqlite_path()) == "/var/t.db"
    assert sqlite3.sqlite_version_info >= (3, 24)  # ON CONFLICT DO NOTHING
