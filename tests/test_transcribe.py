"""The file adapter: an input damaged partway keeps exactly the transcript of the audio
before the damage, in a batch with good files (which stay as if decoded alone) and paced
as live audio; an input that fails gives no events."""

import numpy as np
import pytest
import soundfile as sf

from conftest import make_recognizer
from decode_utils import key
from model_factory import test_audio
from streamdec import EndpointConfig
from streamdec.files.transcribe import transcribe_files, transcribe_realtime

RATE = 16000


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["lstm"], endpoint=EndpointConfig(enabled=False))


def damaged_input(kind: str, folder):
    """(path, samples of the undamaged original, error text) of a damaged input."""
    audio = test_audio(4.0, seed=60)
    if kind == "truncated flac":
        whole = folder / "whole.flac"
        sf.write(str(whole), audio, RATE, subtype="PCM_16")
        path = folder / "cut.flac"
        path.write_bytes(whole.read_bytes()[:whole.stat().st_size // 2])
        return path, sf.read(str(whole), dtype="float32")[0], "flac decoder lost sync"
    bad = audio.copy()
    bad[int(2.55 * RATE)] = {"nan": np.nan, "inf": -np.inf, "beyond [-1, 1]": 40.0}[kind]
    path = folder / "bad.wav"
    sf.write(str(path), bad, RATE, subtype="FLOAT")
    message = "must lie in [-1, 1]" if kind == "beyond [-1, 1]" else "NaN or infinity"
    return path, audio, message


def alone(rec, samples, folder, name):
    path = folder / name
    sf.write(str(path), samples, RATE, subtype="FLOAT")
    (result,) = transcribe_files(rec, [path])
    assert result.error is None
    return result


@pytest.mark.parametrize("kind", ["truncated flac", "nan", "inf", "beyond [-1, 1]"])
def test_damaged_file_keeps_the_transcript_before_the_damage(rec, tmp_path, kind):
    path, original, message = damaged_input(kind, tmp_path)
    goods = [test_audio(2.0, seed=61), test_audio(3.0, seed=62)]
    good_paths = []
    for n, g in enumerate(goods):
        good_paths.append(tmp_path / f"good{n}.wav")
        sf.write(str(good_paths[-1]), g, RATE, subtype="FLOAT")
    first, damaged, second = transcribe_files(rec, [good_paths[0], path, good_paths[1]],
                                              batch_size=3)
    assert message in str(damaged.error) and str(damaged.error).startswith(f"{path}: ")
    assert not damaged.failed and damaged.events[-1].is_eof
    kept = round(damaged.duration * RATE)
    assert kept % RATE == 0 and 0 < kept < len(original)  # whole 1 s blocks
    if kind != "truncated flac":
        assert kept == 2 * RATE  # the block [2 s, 3 s) holds the bad sample
    ref = alone(rec, original[:kept], tmp_path, "prefix.wav")
    assert any(r.token_ids for r in ref.finals), "the test model emitted nothing"
    assert key(damaged.finals) == key(ref.finals)
    for got, g in zip((first, second), goods):  # neighbours as if decoded alone
        assert got.error is None and key(got.finals) == key(alone(rec, g, tmp_path, "g.wav").finals)


@pytest.mark.parametrize("kind", ["truncated flac", "nan"])
def test_damaged_file_paced_as_live_audio(rec, tmp_path, kind):
    path, original, message = damaged_input(kind, tmp_path)
    seen = []
    result = transcribe_realtime(rec, path, chunk_ms=100, sleep=lambda s: None,
                                 on_event=lambda f, e: seen.append(e))
    assert message in str(result.error) and not result.failed and seen == result.events
    kept = round(result.duration * RATE)
    assert kept % (RATE // 10) == 0 and 0 < kept < len(original)  # whole 0.1 s blocks
    if kind == "nan":
        assert kept == int(2.5 * RATE)
    ref = alone(rec, original[:kept], tmp_path, "prefix.wav")
    assert any(r.token_ids for r in ref.finals), "the test model emitted nothing"
    assert key(result.finals) == key(ref.finals)


@pytest.mark.parametrize("realtime", [False, True])
def test_damage_in_the_first_block_fails_the_file(rec, tmp_path, realtime):
    audio = test_audio(2.0, seed=63)
    audio[100] = np.nan
    path = tmp_path / "x.wav"
    sf.write(str(path), audio, RATE, subtype="FLOAT")
    result = (transcribe_realtime(rec, path, sleep=lambda s: None) if realtime
              else next(transcribe_files(rec, [path])))
    assert result.failed and result.events == [] and result.duration == 0.0
    assert str(result.error) == (f"{path}: unusable samples after 0.00 s (samples contain NaN "
                                 "or infinity)")


def test_realtime_reports_an_input_that_cannot_be_opened(rec, tmp_path):
    result = transcribe_realtime(rec, tmp_path, sleep=lambda s: None)
    assert result.failed and str(result.error) == f"{tmp_path}: is a directory, not an audio file"
