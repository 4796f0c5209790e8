"""Keyword spotting on telephone calls, end to end: real ``streamdec serve`` processes on the
real model published for spotting (``../shared/models/``), a real call over Twilio Media
Streams (8 kHz mu-law, both tracks: the replay client of ``clients/``) made of real
recorded voices (``../shared/data/real-en/``): a read sentence and the wake word COMPUTER
on the inbound leg, then JARVIS on the outbound leg.

- keywords set by the call (a TwiML ``<Parameter name="keywords">``): each fires once, on
  its own leg and channel, at a time inside its clip's speech on the call's timeline; the
  subscriber of ``/calls/{id}`` gets it, the transcript store (SQLite) holds it and reads it
  back over HTTP, and the webhook (the store's outbox) gets it with its idempotency key;
- the same call without keywords sends no keyword message and every other message as the
  call with keywords does;
- a bad keyword list of a call ends that call alone (1008, the line named) while another
  call goes on; a bad list in an audio fork's URL is refused at the handshake (400);
- the server's own list (``STREAMDEC_CALL_KEYWORDS``) spots on every call, PostgreSQL
  holds the events, and a call's own line for the same keyword takes its place (its
  threshold);
- a bad line in the server's list refuses the start, naming the line.

A missing model or data folder fails every test here, saying where it was looked for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets

from postgres_utils import PostgresServer
from server_utils import UNIT, ServerProcess, get, run
from shared_data import REAL_EN, REAL_MODEL
from test_keywords import EARLY, LATE, _speech
from test_telephony_webhook import Hook, hook  # noqa: F401  (the receiver fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import twilio_replay  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SENTENCE = "vctk_p239/audio/data/VCTK-Corpus/wav48/p239/p239_002.opus"  # "Ask her to bring..."
COMPUTER = "picovoice_wakewords/audio/audio/computer/04685ec1-bfbf-4c53-a852-60274a74d80e.opus"
JARVIS = "picovoice_wakewords/audio/audio/jarvis/008a6329-b20c-4cfc-9ad4-9e7034bc5148.opus"
#: samples of the agent's turn (JARVIS) before the caller speaks
TURN = 49152
#: the keywords heard, in time order (leg, channel, keyword)
HEARD = [("outbound", 1, "JARVIS"), ("inbound", 0, "COMPUTER")]


def _read(name: str) -> np.ndarray:
    path = REAL_EN / name
    if not path.exists():
        pytest.fail(f"real speech missing: {path} (the shared folder beside the repository)")
    samples, rate = sf.read(path, dtype="float32")
    assert rate == 16000 and samples.ndim == 1, name
    return samples


@pytest.fixture(scope="module")
def call(tmp_path_factory):
    """The call's two sides at 8 kHz (the replay client sends them as Twilio does: mu-law,
    inbound and outbound) and where each keyword's speech lies on its timeline: {keyword:
    (start, end)} in seconds."""
    if not (REAL_MODEL / "tokens.txt").exists():
        pytest.fail(f"real model missing: {REAL_MODEL} (the shared folder beside the "
                    "repository)")
    sentence, computer, jarvis = _read(SENTENCE), _read(COMPUTER), _read(JARVIS)
    gap = np.zeros(8000, np.float32)
    # turn-taking: the agent (outbound) says JARVIS, then the caller a sentence and COMPUTER
    outbound = jarvis
    inbound = np.concatenate([np.zeros(TURN, np.float32), sentence, gap, computer])
    tail = np.zeros(24000, np.float32)
    outbound = np.concatenate([outbound, np.zeros(len(inbound) - len(outbound), np.float32),
                               tail])
    inbound = np.concatenate([inbound, tail])
    spans = {}
    for word, samples, at in (("JARVIS", jarvis, 0),
                              ("COMPUTER", computer, len(inbound) - len(tail) - len(computer))):
        start, end = _speech(samples)
        spans[word] = (at / 16000 + start, at / 16000 + end)
    path = tmp_path_factory.mktemp("kwcall") / "call.wav"  # mu-law: by the replay client
    sf.write(path, np.stack([soxr.resample(x, 16000, 8000) for x in (inbound, outbound)],
                            axis=1), 8000, subtype="PCM_16")
    return path, spans


def replay(server, path, call_id: str, params=()) -> list[dict]:
    """The call over ``/twilio`` as fast as it goes; every message its subscriber got."""
    return run(asyncio.wait_for(twilio_replay.main(argparse.Namespace(
        file=str(path), url=server.url("/twilio"), token=None, cafile=None, realtime=False,
        json=True, partials=True, call_id=call_id, frame_ms=20, dtmf=[], no_subscribe=False,
        param=list(params))), 120 * UNIT))


def keywords_of(messages) -> list[dict]:
    return [m for m in messages if m["type"] == "keyword"]


def check_heard(heard: list[dict], spans, call_id: str, which=HEARD) -> None:
    """Each keyword of ``which`` once, on its leg, inside its speech; nothing else."""
    assert [(m["leg"], m["channel"], m["keyword"]) for m in heard] == list(which), heard
    for m in heard:
        start, end = spans[m["keyword"]]
        assert start - EARLY <= m["start_time"] < m["end_time"] <= end + LATE, (m, start, end)
        assert 0.25 <= m["score"] <= 1.0  # the default threshold and above
        assert m["call_id"] == call_id and m["protocol"] == "twilio"
        assert "".join(m["tokens"]).replace("\u2581", "") == m["keyword"]


def stored(server, call_id: str) -> dict:
    status, body = get(server.http(f"/calls/{call_id}/transcript"))
    assert status == 200, body
    return json.loads(body)


def same_as_stored(heard: list[dict], transcript: dict) -> None:
    """The stored keywords are the messages' (times, score, units exact), numbered per leg."""
    fields = ("leg", "channel", "keyword", "start_time", "end_time", "score", "tokens")
    assert [{k: m[k] for k in fields} for m in heard] == [
        {k: row[k] for k in fields} for row in transcript["keywords"]]
    assert [row["seq"] for row in transcript["keywords"]] == [0, 0]  # the first of each leg


def start_message(call_id: str, custom: dict) -> str:
    return json.dumps({"event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
                       "start": {"streamSid": "MZ1", "accountSid": "AC1", "callSid": call_id,
                                 "tracks": ["inbound"], "customParameters": custom,
                                 "mediaFormat": {"encoding": "audio/x-mulaw",
                                                 "sampleRate": 8000, "channels": 1}}})


# -- a call's own keywords: subscriber, SQLite store, webhook -----------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory, hook):
    d = tmp_path_factory.mktemp("kwstore")
    s = ServerProcess("--model", str(REAL_MODEL), "--store", f"sqlite:///{d}/store.sqlite3",
                      env={"STREAMDEC_WEBHOOK_URL": hook.url,
                           "STREAMDEC_WEBHOOK_BACKOFF_SECONDS": "0.1",
                           "STREAMDEC_CALL_TEXT_FORMAT": "raw"})
    yield s
    assert s.stop() == 0


def test_a_calls_keywords_reach_its_subscriber_the_store_and_the_webhook(server, hook, call):
    path, spans = call
    out = replay(server, path, "CA-kw", ["keywords=COMPUTER/JARVIS"])
    heard = keywords_of(out)
    check_heard(heard, spans, "CA-kw")
    assert out[-1] == {"type": "call_end", "call_id": "CA-kw", "reason": "stop"}
    for m in heard:  # before the results of the chunk it ended in, on its leg
        after = next(r for r in out[out.index(m):] if r["type"] == "result"
                     and r["leg"] == m["leg"])
        assert after["end_time"] >= m["end_time"] and not after["is_final"], (m, after)
    # stored before it was sent: in the store as the subscriber got it
    transcript = stored(server, "CA-kw")
    same_as_stored(heard, transcript)
    assert transcript["status"] == "ended"
    # the webhook (the store's outbox): each keyword once, with its key
    deadline = time.monotonic() + 20 * UNIT
    while len([b for b in hook.received if b["type"] == "keyword"
               and b["call_id"] == "CA-kw"]) < 2:
        assert time.monotonic() < deadline, hook.received
        time.sleep(0.05)
    posted = [b for b in hook.received if b["type"] == "keyword" and b["call_id"] == "CA-kw"]
    assert posted == [dict(m, idempotency_key=f"CA-kw/{m['leg']}/k0") for m in heard]


def test_a_call_without_keywords_sends_the_same_messages_and_no_keyword(server, call):
    path, _ = call
    spotted = replay(server, path, "CA-spot", ["keywords=COMPUTER/JARVIS"])
    plain = replay(server, path, "CA-plain")
    assert keywords_of(spotted) and not keywords_of(plain)

    def rest(messages, leg):
        """The leg's messages (None: the call's own) but keywords, without the call's id
        and info (the legs' messages interleave as their decodes finish)."""
        return [{k: v for k, v in m.items() if k not in ("call_id", "info")}
                for m in messages if m["type"] != "keyword" and m.get("leg") == leg]

    for leg in (None, "inbound", "outbound"):  # partials too
        assert rest(plain, leg) == rest(spotted, leg), leg
    assert len(rest(plain, "inbound")) > 2 and len(rest(plain, "outbound")) > 2
    assert stored(server, "CA-plain")["keywords"] == []


def test_a_bad_keyword_list_ends_that_call_alone(server, call):
    path, spans = call

    async def bad(custom):
        async with websockets.connect(server.url("/twilio")) as ws:
            await ws.send(start_message("CA-bad", custom))
            await ws.wait_closed()
        return ws.close_code, ws.close_reason

    async def main():
        good = asyncio.ensure_future(twilio_replay.main(argparse.Namespace(
            file=str(path), url=server.url("/twilio"), token=None, cafile=None,
            realtime=True, json=True, partials=False, call_id="CA-good", frame_ms=100,
            dtmf=[], no_subscribe=False, param=["keywords=COMPUTER/JARVIS"])))
        await asyncio.sleep(0.5 * UNIT)
        refused = [await bad({"keywords": "COMPUTER/\u2581NOPEX"}),
                   await bad({"keywords": "JARVIS :0"}), await bad({"keywords": "/"})]
        assert not good.done()
        return refused, await good

    refused, out = run(asyncio.wait_for(main(), 120 * UNIT))
    assert refused == [
        (1008, "customParameters: keywords line 2: '\u2581NOPEX' not in the model's "
               "tokens.txt"),
        (1008, "customParameters: keywords line 1: boost must be in (0, 100], got 0"),
        (1008, "customParameters: keywords: no keyword given")]
    check_heard(keywords_of(out), spans, "CA-good")
    # an audio fork's URL is checked at the handshake
    with pytest.raises(websockets.InvalidStatus) as e:
        run(websockets.connect(server.url("/audiofork?keywords=" + urllib.parse.quote(
            "\u2581NOPEX"))).__aenter__())
    assert e.value.response.status_code == 400
    assert e.value.response.body.decode() == (
        "URL: keywords line 1: '\u2581NOPEX' not in the model's tokens.txt")


# -- the server's list: PostgreSQL --------------------------------------------------------------
def test_the_servers_list_spots_on_every_call_into_postgresql(call):
    path, spans = call
    with PostgresServer() as pg:
        s = ServerProcess("--model", str(REAL_MODEL), "--store", pg.new_database("kw"),
                          env={"STREAMDEC_CALL_KEYWORDS": "COMPUTER/JARVIS",
                               "STREAMDEC_CALL_TEXT_FORMAT": "raw"})
        try:
            heard = keywords_of(replay(s, path, "CA-pg"))
            check_heard(heard, spans, "CA-pg")
            same_as_stored(heard, stored(s, "CA-pg"))
            # the call's own JARVIS line (a threshold above its score) takes the server's
            # place: COMPUTER still fires, JARVIS no longer does
            jarvis, computer = heard
            assert jarvis["keyword"] == "JARVIS" and jarvis["score"] < 0.9
            own = keywords_of(replay(s, path, "CA-own", ["keywords=JARVIS #0.9"]))
            assert own == [dict(computer, call_id="CA-own")]
        finally:
            assert s.stop() == 0


def test_a_bad_line_in_the_servers_list_refuses_the_start_naming_it():
    env = {"STREAMDEC_CALL_KEYWORDS": "COMPUTER/JARVIS #2"}
    done = subprocess.run([sys.executable, "-m", "streamdec", "serve", "--port", "0",
                           "--store", "off", "--model", str(REAL_MODEL)], cwd=REPO,
                          capture_output=True, text=True, timeout=120 * UNIT,
                          env={**__import__("os").environ, **env})
    assert done.returncode == 2, done.stderr
    assert ("server.call_keywords line 2: threshold must be a probability in (0, 1], "
            "got 2") in done.stderr


# -- a crash, and the webhook without the store -------------------------------------------------
def test_sigkill_after_a_keyword_was_sent_loses_it_not(call, tmp_path):
    """The server is killed (SIGKILL) as soon as the subscriber has the first keyword, the
    call still streaming: the server started again on the same store has it, the call
    ``cut``."""
    import signal

    from twilio_replay import twilio_messages

    path, spans = call
    pcm = sf.read(path, dtype="int16")[0]
    messages = [m for _, m in twilio_messages(pcm, "CA-kill", "MZ1",
                                              custom={"keywords": "COMPUTER/JARVIS"})]
    store = f"sqlite:///{tmp_path}/killed.sqlite3"
    env = {"STREAMDEC_CALL_TEXT_FORMAT": "raw"}
    s = ServerProcess("--model", str(REAL_MODEL), "--store", store, env=env)

    async def main():
        heard = []
        async with websockets.connect(s.url("/calls/CA-kill")) as sub:
            ws = await websockets.connect(s.url("/twilio"))
            for m in messages[:len(messages) // 2]:  # JARVIS, not COMPUTER yet; no stop
                await ws.send(json.dumps(m))
            async for text in sub:
                heard.append(json.loads(text))
                if heard[-1]["type"] == "keyword":
                    s.proc.send_signal(signal.SIGKILL)
                    break
        return heard

    try:
        heard = keywords_of(run(asyncio.wait_for(main(), 60 * UNIT)))
    finally:
        s.stop(signal.SIGKILL)
    check_heard(heard, spans, "CA-kill", HEARD[:1])
    again = ServerProcess("--model", str(REAL_MODEL), "--store", store, env=env)
    try:
        transcript = stored(again, "CA-kill")
    finally:
        assert again.stop() == 0
    assert transcript["status"] == "cut"
    fields = ("leg", "channel", "keyword", "start_time", "end_time", "score", "tokens")
    assert [{k: row[k] for k in fields} for row in transcript["keywords"]] == [
        {k: heard[0][k] for k in fields}]


def test_with_the_store_off_the_webhook_queue_posts_keywords_too(hook):
    """The hub's webhook (the store off): a call's keyword messages are posted as its
    finals with text are; partials and empty finals are not."""
    from streamdec.core.results import KeywordEvent
    from streamdec.server.call_events import call_message, keyword_message
    from streamdec.server.config import ServerConfig
    from streamdec.server.subscribers import CallHub

    event = KeywordEvent("JARVIS", 0.8, 1.28, 0.583912, ("\u2581JA", "R", "VI", "S"))
    keyword = keyword_message("CA-mem", "twilio", "outbound", 1, event)
    assert keyword == {"type": "keyword", "call_id": "CA-mem", "protocol": "twilio",
                       "leg": "outbound", "channel": 1, "keyword": "JARVIS",
                       "start_time": 0.8, "end_time": 1.28, "score": 0.5839,
                       "tokens": ["\u2581JA", "R", "VI", "S"]}
    partial = call_message("result", "CA-mem", text="JAR", is_final=False)
    empty = call_message("result", "CA-mem", text="", is_final=True)
    final = call_message("result", "CA-mem", text="JARVIS", is_final=True)

    async def main():
        hub = CallHub(ServerConfig(webhook_url=hook.url, webhook_backoff_seconds=0.1))
        hub.begin("CA-mem", call_message("call_start", "CA-mem"))
        for message in (partial, keyword, empty, final):
            hub.publish("CA-mem", message)
        late = hub.subscribe("CA-mem")  # joins now: the backlog, keywords kept
        assert [m["type"] for m in late.take()] == ["call_start", "keyword", "result",
                                                    "result"]
        hub.unsubscribe(late)
        hub.end("CA-mem", call_message("call_end", "CA-mem", reason="stop"))
        deadline = time.monotonic() + 10 * UNIT
        while hub.webhook.queued and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await hub.close()

    run(main())
    assert [b for b in hook.received if b["call_id"] == "CA-mem"] == [keyword, final]


@pytest.mark.parametrize("layer, want", [
    (("customParameters", {"keywords": "COMPUTER/JARVIS #0.4"}, True),
     ("COMPUTER", "JARVIS #0.4")),
    (("metadata", {"keywords": "COMPUTER"}, False), ("COMPUTER",)),
    (("metadata", {"keywords": ["COMPUTER", "JARVIS #0.4"]}, False),
     ("COMPUTER", "JARVIS #0.4")),
    (("URL", {"keywords": ["COMPUTER"]}, True),
     "URL: keywords must be text (keyword lines with / between them), got ['COMPUTER']"),
    (("metadata", {"keywords": 7}, False), "metadata: keywords must be text (keyword lines "
                                            "with / between them) or a list of strings, got 7"),
    (("metadata", {"keywords": " / "}, False), "metadata: keywords: no keyword given"),
], ids=["text", "json-text", "json-list", "text-list", "json-number", "empty"])
def test_a_calls_keywords_setting_is_text_or_a_json_list(layer, want):
    """The ``keywords`` setting as each source gives it (the lines are checked against the
    model when the call starts, above)."""
    from streamdec.core.endpoint import EndpointConfig
    from streamdec.errors import ClientError
    from streamdec.server.call_settings import SettingsLayer, call_settings
    from streamdec.server.endpointing import EndpointLimits

    where, values, text = layer
    layers = [SettingsLayer(where, values, text)]
    limits = EndpointLimits(max_silence=30.0, max_utterance=600.0)
    if isinstance(want, str):
        with pytest.raises(ClientError) as e:
            call_settings(layers, EndpointConfig(), limits)
        assert (e.value.kind, str(e.value)) == ("bad_config", want)
    else:
        settings = call_settings(layers, EndpointConfig(), limits)
        assert (settings.keywords, settings.keywords_from) == (want, where)


def test_the_servers_list_from_a_config_file_or_the_environment():
    """``[server] call_keywords``: a TOML list of lines, or one string with ``/`` between
    them (``STREAMDEC_CALL_KEYWORDS``); none by default; anything else refused."""
    from streamdec.appconfig import parse_config
    from streamdec.errors import ConfigError
    from streamdec.server.config import ServerConfig, env_overrides

    lines = ["SUPERVISOR", "CANCEL MY ACCOUNT #0.3"]
    assert ServerConfig().call_keywords == ()
    assert parse_config({"server": {"call_keywords": lines}}).server.call_keywords == tuple(
        lines)
    changes = env_overrides({"STREAMDEC_CALL_KEYWORDS": "SUPERVISOR/CANCEL MY ACCOUNT #0.3"})
    assert ServerConfig().updated(changes).call_keywords == tuple(lines)
    with pytest.raises(ConfigError) as e:
        parse_config({"server": {"call_keywords": ["SUPERVISOR", 7]}})
    assert "server.call_keywords must be a list of keyword lines (text), got " \
           "['SUPERVISOR', 7]" in str(e.value)
