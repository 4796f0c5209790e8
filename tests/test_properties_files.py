"""Property-based tests of the parsers of what a user hands the daemon (hypothesis; the
profile is tests/conftest.py's): raw PCM (``decode_pcm``), the multipart upload's form,
config TOML (``load_config``), ``tokens.txt``, an encoder's ONNX metadata, model catalog
entries and model archives' members. Each parser may answer only with its value or the
project's typed error (``streamdec.errors``), whatever it is given: valid input with a
value gone wrong, random values of every type, files cut at any byte. And each keeps
what matters: PCM split at frame boundaries decodes to the same samples; a valid form,
config, table, contract or catalog entry reads as written; an unknown key is named; an
archive never writes outside its destination."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import math
import os
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings, strategies as st

from streamdec.appconfig import load_config
from streamdec.core.endpoint import EndpointConfig
from streamdec.errors import (AudioInputError, ConfigError, ModelDownloadError,
                              ModelLoadError, TokenizeError, UploadError)
from streamdec.audio.features import as_float_samples
from streamdec.hub.archive import unpack
from streamdec.hub.catalog import CatalogEntry, load_catalog
from streamdec.models.config import ModelConfig
from streamdec.models.onnx_backend import FAMILIES, open_session, read_encoder_contract
from streamdec.audio.pcm import ENCODINGS, decode_pcm, deinterleave, sample_size
from streamdec.server.endpointing import ENDPOINT_KEYS, EndpointLimits
from streamdec.server.transcription import RESPONSE_FORMATS, read_form, read_upload
from streamdec.tokens import SymbolTable
from streamdec.validation import build_table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "fuzz"))
from fuzz_multipart import parsed_form  # noqa: E402
from fuzz_onnx_meta import model_bytes  # noqa: E402

# tmp_path is reused by every example of a test: each writes its file anew
REUSE_TMP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


# -- raw PCM -----------------------------------------------------------------------------------
@given(st.binary(max_size=200), st.sampled_from(ENCODINGS + ("s24le", "")), st.integers(1, 4))
def test_decode_pcm_whole_samples_or_audio_input_error(data, encoding, channels):
    try:
        samples = decode_pcm(data, encoding, channels)
    except AudioInputError:
        assert encoding not in ENCODINGS or len(data) % (sample_size(encoding) * channels)
        return
    assert samples.dtype == np.float32 and samples.size * sample_size(encoding) == len(data)
    for channel in deinterleave(samples, channels):
        assert channel.size == samples.size // channels
        try:
            checked = as_float_samples(channel)
        except AudioInputError:
            continue  # empty, NaN / inf or far beyond [-1, 1]: the stream refuses it
        assert float(np.abs(checked).max()) <= 1.0


@given(st.lists(st.binary(max_size=48), max_size=6), st.sampled_from(ENCODINGS),
       st.integers(1, 3))
def test_decode_pcm_split_at_frame_boundaries_gives_the_same_samples(pieces, encoding, channels):
    size = sample_size(encoding) * channels
    pieces = [p[:len(p) // size * size] for p in pieces]
    whole = decode_pcm(b"".join(pieces), encoding, channels)
    parts = [decode_pcm(p, encoding, channels) for p in pieces]
    joined = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    assert whole.tobytes() == joined.tobytes()


@given(st.lists(st.integers(-32768, 32767), max_size=64))
def test_decode_pcm_s16le_is_exact(ints):
    pcm = np.asarray(ints, "<i2")
    assert np.array_equal(decode_pcm(pcm.tobytes(), "s16le") * 32768, pcm.astype(np.float32))


# -- the multipart upload ------------------------------------------------------------------------
def _part(name: str, value: str | bytes, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    body = value.encode() if isinstance(value, str) else value
    return f"Content-Disposition: {disposition}\r\n\r\n".encode() + body


def _body(parts: list[bytes], boundary: str) -> bytes:
    b = boundary.encode()
    return b"".join(b"--" + b + b"\r\n" + p + b"\r\n" for p in parts) + b"--" + b + b"--\r\n"


def _read(body: bytes, boundary: str):
    async def go():
        form = await parsed_form(body, f"multipart/form-data; boundary={boundary}")
        if form is None:
            return None
        try:
            upload, fmt, endpoint, level, *_ = read_form(form, EndpointConfig(),
                                                         EndpointLimits(), "full")
            return await upload.read(), fmt, endpoint, level
        finally:
            await form.close()
    return asyncio.run(go())


def _wav(samples: list[int], rate: int) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.asarray(samples, np.int16), rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


boundaries = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=8, max_size=40)
field_values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                       max_size=12)


@given(boundaries, st.lists(st.integers(-32768, 32767), min_size=1, max_size=200),
       st.sampled_from([8000, 16000, 44100]), st.sampled_from(RESPONSE_FORMATS),
       st.sampled_from(["raw", "punct", "full"]), st.floats(0, 30))
def test_upload_valid_form_reads_as_sent(boundary, samples, rate, fmt, level, silence):
    parts = [_part("response_format", fmt), _part("text_format", level),
             _part("rule2_min_trailing_silence", repr(silence)), _part("model", "whisper-1"),
             _part("file", _wav(samples, rate), "call.wav")]
    data, got_fmt, endpoint, got_level = _read(_body(parts, boundary), boundary)
    assert (got_fmt, got_level, endpoint.rule2.min_trailing_silence) == (fmt, level, silence)
    got_rate, audio = read_upload(data)
    assert got_rate == rate and np.array_equal(audio * 32768, np.asarray(samples, np.float32))


@given(boundaries, st.lists(st.tuples(
    st.sampled_from(("file", "response_format", "text_format", "language", "model")
                    + ENDPOINT_KEYS) | st.text("abcxyz_[]", min_size=1, max_size=8),
    field_values | st.binary(max_size=40), st.booleans()), max_size=6), st.data())
def test_upload_any_form_is_taken_or_an_upload_error(boundary, fields, data):
    parts = [_part(name, value, "f.bin" if as_file else None)
             for name, value, as_file in fields]
    body = _body(parts, boundary)
    cut = data.draw(st.integers(0, len(body)), "cut at")
    for chunk in (body, body[:cut]):
        try:
            got = _read(chunk, boundary)
        except UploadError:
            continue
        if got is None:
            continue  # the endpoint's 400 for a body its parser refused
        audio, fmt, endpoint, level = got
        assert fmt in RESPONSE_FORMATS and level in ("raw", "punct", "full")
        try:
            rate, samples = read_upload(audio)
        except UploadError:
            continue
        assert rate > 0 and samples.size > 0


# -- config TOML -------------------------------------------------------------------------------
def _toml(value) -> str:
    """A TOML value (inline) for a Python one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") \
            if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return '""'  # None: TOML has no null


def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _tables():
    from streamdec.audio.features import FeatureConfig
    from streamdec.rayserve.config import RayConfig
    from streamdec.search.config import SearchConfig
    from streamdec.server.config import SETTINGS
    from streamdec.audio.vad import VadConfig

    return {"model": _fields(ModelConfig), "features": _fields(FeatureConfig),
            "search": _fields(SearchConfig), "endpoint": ["enabled"],
            "vad": _fields(VadConfig), "audio": ["sample_rate", "chunk_ms"],
            "server": list(SETTINGS), "ray": _fields(RayConfig)}


TABLES = _tables()
config_docs = st.dictionaries(st.sampled_from(sorted(TABLES)), st.data(), max_size=3)


@REUSE_TMP
@given(st.sampled_from(sorted(TABLES)), st.data())
def test_config_any_values_load_or_config_error(tmp_path, table, data):
    keys = data.draw(st.lists(st.sampled_from(TABLES[table]), max_size=4, unique=True))
    text = f"[{table}]\n" + "".join(f"{k} = {_toml(data.draw(values, k))}\n" for k in keys)
    if data.draw(st.booleans(), "unknown key"):
        text += "colour_of_the_sky = 1\n"
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_config(path)
    except ConfigError as e:
        if "colour_of_the_sky" in text:
            assert "colour_of_the_sky" in str(e) or str(e)  # named when it is the reason
    except ModelLoadError as e:  # model_dir names a catalog model not downloaded
        assert "not downloaded" in str(e)
    else:
        assert "colour_of_the_sky" not in text


@REUSE_TMP
@given(st.sampled_from(sorted((REPO / "streamdec" / "configs").glob("*.toml"))), st.data())
def test_shipped_config_cut_at_any_byte_loads_or_config_error(tmp_path, shipped, data):
    text = shipped.read_bytes()
    path = tmp_path / "c.toml"
    path.write_bytes(text[:data.draw(st.integers(0, len(text)))])
    try:
        load_config(path)
    except ConfigError:
        pass


# -- tokens.txt --------------------------------------------------------------------------------
symbols = st.sampled_from(["<blk>", "<unk>", "\u2581", "#0", "#12", "<0x41>", "<0xE2>",
                           "<0x96>", "<0x81>", "<sos/eos>"]) | st.text(
    st.characters(blacklist_categories=("Zs", "Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=4)
token_ids = st.integers(-3, 40).map(str) | st.sampled_from(["x", "1.5", "9" * 5000, "٣"])


@REUSE_TMP
@given(st.lists(st.tuples(symbols, token_ids), max_size=30), st.lists(st.integers(-2, 45),
                                                                         max_size=20))
def test_tokens_file_reads_or_model_load_error(tmp_path, lines, ids):
    path = tmp_path / "tokens.txt"
    path.write_text("".join(f"{s} {i}\n" for s, i in lines), encoding="utf-8")
    try:
        table = SymbolTable.from_file(path)
    except ModelLoadError:
        return
    expected = {}
    for sym, idx in lines:
        if not (sym.startswith("#") and sym[1:].isdigit()):
            expected.setdefault(int(idx), sym)
    assert table.id_to_symbol == expected
    text = table.text(ids)
    assert text == " ".join(text.split())
    for word, first, last in table.word_spans(ids):
        assert word and 0 <= first <= last < len(ids)
    try:
        table.encode("a b")
    except TokenizeError:
        pass


# -- an encoder's ONNX metadata ------------------------------------------------------------------
meta_text = st.integers(-2, 200).map(str) | st.text(max_size=6)


@REUSE_TMP
@given(st.fixed_dictionaries({}, optional={
    "model_type": st.sampled_from(FAMILIES) | st.text(max_size=8), "T": meta_text,
    "decode_chunk_len": meta_text, "feature": st.sampled_from(["fbank", "mfcc"]) | meta_text,
    "normalize_type": st.sampled_from(["", "global"]), "blank_id": meta_text,
    "sample_rate": meta_text, "frame_shift_ms": meta_text}),
    st.lists(st.tuples(st.sampled_from(["cached_key", "cached_len", "processed_lens", "s"]),
                       st.sampled_from(["float", "int64", "bool", "float16"]),
                       st.lists(st.sampled_from(["N", "1", "4", "B"]), max_size=4)),
             max_size=3), st.booleans())
def test_encoder_metadata_reads_as_written_or_model_load_error(tmp_path, meta, states, drop):
    lines = [f"{k}\t{v}" for k, v in meta.items()] + ["@x\tfloat\tN,45,80"]
    lines += [f"@{name}_{n}\t{kind}\t{','.join(dims)}" for n, (name, kind, dims)
              in enumerate(states)] + (["-"] if drop else [])
    path = tmp_path / "encoder.onnx"
    path.write_bytes(model_bytes("\n".join(lines)))
    try:
        contract = read_encoder_contract(open_session(path, ModelConfig()), path)
    except ModelLoadError:
        return
    assert contract.model_type == meta["model_type"] in FAMILIES
    assert (contract.chunk_frames, contract.chunk_shift) == (int(meta["T"]),
                                                             int(meta["decode_chunk_len"]))
    assert contract.feature_dim == 80 and len(contract.state_layout.specs) == len(states)


# -- catalog entries ---------------------------------------------------------------------------
GOOD_ENTRY = {"name": "m-1", "url": "https://example.com/m-1.tar.bz2",
              "files": ["tokens.txt"], "size_bytes": 10, "sha256": "A" * 64, "cpu": "low"}


@given(st.sampled_from([f.name for f in dataclasses.fields(CatalogEntry)] + ["colour"]), values)
def test_catalog_entry_with_any_value_is_an_entry_or_config_error(key, value):
    table = dict(GOOD_ENTRY, **{key: value})
    try:
        entry = build_table(CatalogEntry, table, "catalog [[model]] #1")
    except ConfigError:
        return
    assert key != "colour"
    assert isinstance(entry.files, tuple) and all(isinstance(f, str) and f for f in entry.files)
    assert entry.sha256 is None or entry.sha256 == entry.sha256.lower()


@REUSE_TMP
@given(st.lists(st.sampled_from(["m-1", "m-2", "../m", "m 3"]), min_size=1, max_size=3))
def test_catalog_file_names_each_model_once(tmp_path, names):
    path = tmp_path / "catalog.toml"
    path.write_text("".join("[[model]]\n" + "".join(
        f"{k} = {_toml(v)}\n" for k, v in dict(GOOD_ENTRY, name=name).items())
        for name in names))
    try:
        entries = load_catalog(path)
    except ConfigError as e:
        assert len(set(names)) < len(names) or {"../m", "m 3"} & set(names), e
        return
    assert set(names) <= set(entries)


# -- model archives ------------------------------------------------------------------------------
member_names = st.sampled_from(["model/tokens.txt", "model", "model/../../evil", "/etc/evil",
                                "..", "model/a/../b", "C:evil", "\\evil", "model/.hidden",
                                "model//x", "./model/y"]) | st.text(
    "abc./", min_size=1, max_size=10)
member_types = st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE,
                                tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE])


def _archive(members, mode: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode, format=tarfile.GNU_FORMAT) as tar:
        for name, kind, target, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = kind, target, 0o644
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return out.getvalue()


def _outside(root: Path, dest: Path) -> list[str]:
    """What is under ``root`` besides ``dest`` and the archive, and the links in ``dest``
    that lead out of it."""
    out = [p.name for p in root.iterdir() if p.name not in ("dest", "a.tar")]
    for folder, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = Path(folder) / name
            real = os.path.realpath(p)
            inside = real == str(dest.resolve()) or real.startswith(str(dest.resolve()) + os.sep)
            if p.is_symlink() and not inside:
                out.append(str(p))
    return out


@REUSE_TMP
@given(st.lists(st.tuples(member_names, member_types, member_names, st.binary(max_size=20)),
                max_size=5), st.sampled_from(["w", "w:gz", "w:bz2"]), st.data())
def test_archive_unpacks_or_is_refused_and_never_writes_outside(tmp_path, members, mode, data):
    import shutil

    blob = _archive(members, mode)
    cut = data.draw(st.integers(0, len(blob)), "cut at")
    for n, chunk in enumerate((blob, blob[:cut])):
        root = tmp_path / f"try{n}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        (root / "a.tar").write_bytes(chunk)
        try:
            unpack(root / "a.tar", root / "dest")
        except ModelDownloadError:
            pass
        else:
            escaping = [m for m in members if m[0].startswith(("/", "\\")) or m[0] == ".."
                        or "../.." in m[0] or m[0].startswith("../")]
            assert not escaping or n == 1, f"unpacked {escaping}"
        assert _outside(root, root / "dest") == []


def test_properties_ran_with_the_profile():
    """The profile of tests/conftest.py is the one in force (derandomized, no deadline)."""
    assert settings().derandomize and settings().deadline is None
    assert settings().max_examples == int(os.environ.get("STREAMDEC_HYPOTHESIS_EXAMPLES", "60"))
