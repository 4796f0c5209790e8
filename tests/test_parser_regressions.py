"""Inputs that once broke a parser of the daemon, each replayed here: it must now get the
project's typed error (or be taken), never a stray exception. Found while writing the
property-based tests (tests/test_properties_*.py: the JSON, number and TOML cases, read
off the code and confirmed by those tests on the code before the fixes), by those tests
(each case says so) and by the fuzz campaign (bench/fuzz/; its inputs are also replayed
by tests/test_fuzz_targets.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from streamdec import SearchConfig
from streamdec.errors import ClientError
from streamdec.server import jsontext
from streamdec.server.audiofork import AudioForkProtocol
from streamdec.server.call_events import CallNote, CallStarted
from streamdec.server.options import StreamOptions
from streamdec.server.twilio import TwilioProtocol
from streamdec.server.vosk import VoskSession

REPO = Path(__file__).resolve().parents[1]
DEEP = "[" * 100_000  # json.loads: RecursionError, not ValueError
START = json.dumps({"event": "start", "start": {
    "callSid": "CA1", "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000}}})


def vosk(*messages):
    session = VoskSession(StreamOptions(8000, "s16le"), SearchConfig())
    for m in messages:
        session.receive(m)


def twilio(*messages):
    protocol = TwilioProtocol()
    return [e for m in messages for e in protocol.receive(m)]


# -- JSON nested too deep ---------------------------------------------------------------------
@pytest.mark.parametrize("depth, ok", [(1, True), (32, True), (33, False), (100_000, False)])
def test_peer_json_nesting_is_bounded(depth, ok):
    text = "[" * depth + "]" * depth
    if ok:
        assert jsontext.loads(text) is not None
    else:
        with pytest.raises(ValueError, match="nested deeper than 32"):
            jsontext.loads(text)


@pytest.mark.parametrize("send", [lambda: vosk(DEEP), lambda: twilio(DEEP),
                                  lambda: twilio(START, '{"event": "mark", "mark": ' + DEEP)])
def test_json_too_deep_is_bad_json(send):
    with pytest.raises(ClientError) as e:
        send()
    assert e.value.kind == "bad_json" and "nested deeper than 32" in str(e.value)


def test_audiofork_metadata_and_notes_too_deep_are_text():
    protocol = AudioForkProtocol({}, "call-1")
    [started] = protocol.receive(DEEP)
    assert isinstance(started, CallStarted) and started.info["metadata"] == DEEP
    assert protocol.receive("[" * 40 + "]" * 40) == [CallNote("text", "[" * 40 + "]" * 40)]


# -- a JSON array or object where a string was due (set / frozenset / dict lookups) -----------
def _twilio_start(tracks):
    return json.dumps({"event": "start", "start": {
        "callSid": "CA1", "tracks": tracks,
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000}}})


@pytest.mark.parametrize("messages, text", [
    ([_twilio_start([["inbound"]])], "tracks must be a list"),
    ([_twilio_start([{"a": 1}, "inbound"])], "tracks must be a list"),
    ([START, json.dumps({"event": "dtmf", "dtmf": {"digit": ["5"]}})], "invalid digit"),
    ([START, json.dumps({"event": "dtmf", "dtmf": {"digit": {"5": 1}}})], "invalid digit"),
])
def test_twilio_unhashable_values_are_bad_message(messages, text):
    with pytest.raises(ClientError) as e:
        twilio(*messages)
    assert e.value.kind == "bad_message" and text in str(e.value)


@pytest.mark.parametrize("mix", [[], ["stereo"], {"stereo": 1}])
def test_audiofork_unhashable_mix_type_is_bad_config(mix):
    with pytest.raises(ClientError) as e:
        AudioForkProtocol({}, "call-1").receive(json.dumps({"mixType": mix}))
    assert e.value.kind == "bad_config" and "mix type must be one of" in str(e.value)


# -- Infinity / NaN where an integer was due ----------------------------------------------------
@pytest.mark.parametrize("timestamp", ["Infinity", "-Infinity", "NaN"])
def test_twilio_timestamp_infinity_is_bad_message(timestamp):
    media = '{"event": "media", "media": {"payload": "", "timestamp": %s}}' % timestamp
    with pytest.raises(ClientError) as e:
        twilio(START, media)
    assert e.value.kind == "bad_message" and "timestamp must be milliseconds" in str(e.value)


@pytest.mark.parametrize("key, value, text", [
    ("sample_rate", "Infinity", "must be an integer"),
    ("sample_rate", "NaN", "must be an integer"),
    ("max_alternatives", "-Infinity", "must be an integer"),
    ("sample_rate", "1" + "0" * 400, "must be in [8000, 96000]"),
])
def test_vosk_config_integer_infinity_is_bad_config(key, value, text):
    with pytest.raises(ClientError) as e:
        vosk('{"config": {"%s": %s}}' % (key, value))
    assert e.value.kind == "bad_config" and text in str(e.value)


# -- an integer beyond a float's range where seconds were due -------------------------------------
BIG = "1" + "0" * 400  # float(10**400): OverflowError


def test_vosk_endpoint_rule_beyond_a_float_is_bad_config():
    with pytest.raises(ClientError) as e:
        vosk('{"config": {"rule1_min_trailing_silence": %s}}' % BIG)
    assert e.value.kind == "bad_config" and "must be a number of seconds" in str(e.value)


def test_audiofork_metadata_endpoint_rule_beyond_a_float_is_bad_config():
    from streamdec.core.endpoint import EndpointConfig
    from streamdec.server.call_settings import call_settings
    from streamdec.server.endpointing import EndpointLimits

    [started] = AudioForkProtocol({}, "call-1").receive(
        '{"callSid": "c", "rule2_min_trailing_silence": %s}' % BIG)
    with pytest.raises(ClientError) as e:
        call_settings(started.settings, EndpointConfig(), EndpointLimits())
    assert e.value.kind == "bad_config" and "metadata: rule2_min_trailing_silence" in str(e.value)


# -- TOML nested too deep -------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["a = " + "[" * 5000, "a = " + "{b = " * 5000])
def test_config_and_catalog_nested_too_deep_are_config_errors(tmp_path, text):
    from streamdec.appconfig import load_config
    from streamdec.errors import ConfigError
    from streamdec.hub.catalog import load_catalog

    path = tmp_path / "deep.toml"
    path.write_text(text)
    for load in (load_config, load_catalog):
        with pytest.raises(ConfigError, match="nested too deep"):
            load(path)


# -- an encoder whose first input is not (N, T, F) ----------------------------------------------
@pytest.mark.parametrize("features, text", [
    ("@x\tfloat\t", "input 0 must be the features (N, T, F), got shape []"),
    ("@x\tfloat\tN,80", "input 0 must be the features (N, T, F), got shape ['N', 80]"),
    ("@x\tfloat\tN,45,F", "input 0 must declare a fixed feature dim"),
])
def test_encoder_features_input_of_another_rank_is_a_model_load_error(tmp_path, features, text):
    """Found by the fuzz campaign (bench/fuzz/crashes/onnx_meta/crash-f81bc81d...): an
    encoder declaring a scalar first input raised IndexError reading its feature dim."""
    sys.path.insert(0, str(REPO / "bench" / "fuzz"))
    from fuzz_onnx_meta import model_bytes

    from streamdec.errors import ModelLoadError
    from streamdec.models.config import ModelConfig
    from streamdec.models.onnx_backend import _fixed_batch, open_session, read_encoder_contract

    path = tmp_path / "encoder.onnx"
    path.write_bytes(model_bytes(f"model_type\tzipformer2\nT\t45\ndecode_chunk_len\t32\n"
                                 f"{features}\n@cached_key_0\tfloat\t128,N,32\n"))
    session = open_session(path, ModelConfig())
    with pytest.raises(ModelLoadError) as e:
        read_encoder_contract(session, path)
    assert text in str(e.value)
    assert _fixed_batch(session, path) is False  # a scalar input: no fixed batch, no IndexError


# -- a Twilio mark before start ------------------------------------------------------------------
def test_twilio_mark_before_start_is_bad_message():
    """Found by test_properties_protocols (a mark first): it gave a CallNote before the call
    started, published under no call id; Twilio sends marks only on a started stream."""
    with pytest.raises(ClientError) as e:
        twilio('{"event": "mark", "mark": {"name": "m"}}')
    assert e.value.kind == "bad_message" and "mark before start" in str(e.value)
    assert twilio(START, '{"event": "mark", "mark": {"name": "m"}}')[1] == CallNote("mark", "m")


# -- an upload that decodes to far more than it weighs ------------------------------------------
def _flac_silence(seconds: int, rate: int = 8000) -> bytes:
    import io

    import numpy as np
    import soundfile as sf

    out = io.BytesIO()
    sf.write(out, np.zeros(rate * seconds, np.int16), rate, format="FLAC")
    return out.getvalue()


def test_upload_longer_than_the_stream_limit_is_refused_before_decoding():
    """15 KB of FLAC is 10 minutes of silence: read whole, an upload of 100 MB of it (the
    default max_upload_bytes) was ~140 GB of float32 samples at once. Now an upload over
    max_stream_seconds is refused from its header, before a sample is decoded."""
    import tracemalloc

    from streamdec.errors import UploadError
    from streamdec.server.transcription import read_upload

    bomb = _flac_silence(600)
    assert len(bomb) < 20_000
    tracemalloc.start()
    try:
        with pytest.raises(UploadError, match="600 s of audio, over the limit of 60 s"):
            read_upload(bomb, max_seconds=60)
        assert tracemalloc.get_traced_memory()[1] < 1_000_000  # bytes: nothing decoded
    finally:
        tracemalloc.stop()
    rate, samples = read_upload(bomb, max_seconds=600)
    assert (rate, samples.shape, samples.dtype.name) == (8000, (4_800_000,), "float32")


def test_upload_whose_header_hides_its_length_is_refused_once_over_the_limit():
    """The same file with its header's sample count zeroed (FLAC's 'unknown'): refused
    after the limit's worth is decoded, a block at a time, not after all of it."""
    from streamdec.errors import UploadError
    from streamdec.server.transcription import read_upload

    bomb = bytearray(_flac_silence(600))
    bomb[21] &= 0xF0  # STREAMINFO's total samples: the last 36 bits of bytes 21..25
    bomb[22:26] = bytes(4)
    with pytest.raises(UploadError, match="over 60 s of audio"):
        read_upload(bytes(bomb), max_seconds=60)


# -- a config's text setting given another type --------------------------------------------------
@pytest.mark.parametrize("text, key", [
    ("[ray]\naddress = []\n", "address"),  # found by test_properties_files
    ("[ray]\naddress = 1\n", "address"),
    ("[server]\nwebhook_url = 5\n", "webhook_url"),
    ('[server]\ntwilio_auth_token_file = "t"\ntwilio_stream_url = {a = 1}\n',
     "twilio_stream_url"),
    ("[model]\nvariant = true\n", "variant"),
])
def test_config_text_setting_of_another_type_is_a_config_error(tmp_path, text, key):
    """A TOML array or number for a text setting raised AttributeError ('list' object has
    no attribute 'strip') from the setting's own check."""
    from streamdec.appconfig import load_config
    from streamdec.errors import ConfigError

    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"{key} must be text, got"):
        load_config(path)


# -- a gzip archive cut short --------------------------------------------------------------------
@pytest.mark.parametrize("cut", range(0, 12))
def test_archive_cut_anywhere_in_its_gzip_header_is_a_download_error(tmp_path, cut):
    """Found by test_properties_files: a .tar.gz cut after 3 bytes raised TypeError (ord()
    of nothing) from tarfile's stream reader instead of ModelDownloadError."""
    import io
    import tarfile

    from streamdec.errors import ModelDownloadError
    from streamdec.hub.archive import unpack

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz"):
        pass
    (tmp_path / "m.tar.gz").write_bytes(out.getvalue()[:cut])
    with pytest.raises(ModelDownloadError, match="not a readable"):
        unpack(tmp_path / "m.tar.gz", tmp_path / "dest")


# -- archive links tarfile cannot make ----------------------------------------------------------
def _tar(tmp_path, members) -> Path:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, kind, link, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, link, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    (tmp_path / "m.tar").write_bytes(out.getvalue())
    return tmp_path / "m.tar"


@pytest.mark.parametrize("members", [
    [("a", b"0", "", b"x"), ("a/b", b"2", "b", b"")],  # a symlink under a file: os.symlink fails
    [("a", b"0", "", b"x"), (".", b"2", ".", b"")],
    [("m/a", b"1", "m/a", b"")],  # a hard link to itself
])
def test_archive_link_that_cannot_be_made_is_a_download_error(tmp_path, members):
    """Found by test_properties_files: a link tarfile could not make (a symlink below a
    file) it unpacks as a copy of its target, which here is the link itself: RecursionError
    out of unpack instead of ModelDownloadError."""
    from streamdec.errors import ModelDownloadError
    from streamdec.hub.archive import unpack

    with pytest.raises(ModelDownloadError, match="not a readable"):
        unpack(_tar(tmp_path, members), tmp_path / "dest")


def test_archive_hard_link_inside_the_model_is_unpacked(tmp_path):
    """A hard link to a file of the archive was refused as 'a device or a FIFO' (the
    check for links leaving the directory fell through to the one for devices)."""
    from streamdec.hub.archive import unpack

    model = unpack(_tar(tmp_path, [("m/tokens.txt", b"0", "", b"<blk> 0\n"),
                                   ("m/copy.txt", b"1", "m/tokens.txt", b"")]), tmp_path / "d")
    assert (model / "copy.txt").read_text() == "<blk> 0\n"


# -- a catalog size given as a boolean -----------------------------------------------------------
def test_catalog_size_bytes_true_is_a_config_error():
    """size_bytes = true passed as an archive size of 1 byte (a bool is an int)."""
    from streamdec.errors import ConfigError
    from streamdec.hub.catalog import CatalogEntry

    with pytest.raises(ConfigError, match="size_bytes must be a positive integer, got True"):
        CatalogEntry("m", "https://example.com/m.tar.bz2", ("tokens.txt",), size_bytes=True)
