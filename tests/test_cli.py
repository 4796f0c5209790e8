import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from streamdec.cli.main import main
from model_factory import test_audio


@pytest.fixture(scope="module")
def wavs(tmp_path_factory):
    d = tmp_path_factory.mktemp("wavs")
    paths = []
    for n, (rate, subtype) in enumerate([(16000, "PCM_16"), (8000, "PCM_16"), (22050, "FLOAT"),
                                         (44100, "PCM_24")]):
        p = d / f"clip{n}.{'flac' if n == 3 else 'wav'}"
        sf.write(str(p), test_audio(2.5 + n, seed=80 + n, rate=rate), rate, subtype=subtype)
        paths.append(str(p))
    return paths


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_text_one_line_per_file_in_input_order(capsys, wavs, model_dirs):
    code, out, err = run_cli(capsys, "transcribe", *wavs, "--model", str(model_dirs["lstm"]),
                             "--batch-size", "3", "--no-endpoint")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 4
    # each line equals transcribing that file alone
    code, alone, _ = run_cli(capsys, "transcribe", wavs[2], "--model", str(model_dirs["lstm"]),
                             "--no-endpoint")
    assert alone.splitlines() == [lines[2]] and lines[2]


def test_jsonl_events(capsys, wavs, model_dirs):
    code, out, err = run_cli(capsys, "transcribe", wavs[0], "--model",
                             str(model_dirs["zipformer2"]), "--format", "jsonl")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert {"file", "type", "segment", "text", "tokens", "timestamps", "start", "end"} <= set(events[0])
    assert events[-1]["type"] == "final" and events[-1]["is_eof"]
    assert {e["type"] for e in events} == {"partial", "final"}
    assert all(e["file"] == wavs[0] for e in events)
    for e in events:
        assert len(e["tokens"]) == len(e["timestamps"])
        assert [w["word"] for w in e["words"]] == e["text"].split()
        for w in e["words"]:
            assert e["start"] <= w["start"] < w["end"] and 0 < w["conf"] <= 1


@pytest.mark.parametrize("fmt, head", [("srt", "1\n00:00:0"), ("vtt", "WEBVTT\n\n00:00:0")])
def test_subtitles(capsys, wavs, model_dirs, fmt, head):
    code, out, err = run_cli(capsys, "transcribe", wavs[1], "--model",
                             str(model_dirs["zipformer2"]), "--format", fmt)
    assert code == 0, err
    assert out.startswith(head)
    assert " --> " in out


def test_output_dir(capsys, wavs, model_dirs, tmp_path):
    code, out, err = run_cli(capsys, "transcribe", *wavs[:2], "--model",
                             str(model_dirs["lstm"]), "--format", "vtt", "--output-dir",
                             str(tmp_path))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip0.vtt", "clip1.vtt"]


def test_realtime_paces_and_prints_finals(capsys, wavs, model_dirs):
    import time

    t0 = time.monotonic()
    code, out, err = run_cli(capsys, "transcribe", wavs[0], "--model",
                             str(model_dirs["zipformer2"]), "--realtime")
    assert code == 0, err
    assert time.monotonic() - t0 >= 2.3  # 2.5 s of audio, paced
    assert out.strip()


def test_a_bad_file_fails_alone(capsys, wavs, model_dirs, tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF nonsense")
    code, out, err = run_cli(capsys, "transcribe", wavs[0], str(bad), str(tmp_path / "missing.wav"),
                             wavs[1], "--model", str(model_dirs["lstm"]))
    assert code == 1
    assert "bad.wav: not a readable audio file" in err
    assert "missing.wav: audio file not found" in err
    assert len(out.splitlines()) == 2


def test_empty_audio_file(capsys, model_dirs, tmp_path):
    p = tmp_path / "empty.wav"
    sf.write(str(p), np.zeros(0, np.float32), 16000)
    code, out, err = run_cli(capsys, "transcribe", str(p), "--model", str(model_dirs["lstm"]))
    assert code == 1 and "holds no audio samples" in err


def test_corrupt_model_dir_is_a_clear_error(capsys, wavs, tmp_path):
    code, out, err = run_cli(capsys, "transcribe", wavs[0], "--model", str(tmp_path))
    assert code == 2
    assert "encoder.onnx: model file not found" in err


def test_unknown_config_key(capsys, wavs, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[search]\nmethd = 'greedy'\n")
    code, out, err = run_cli(capsys, "transcribe", wavs[0], "--config", str(cfg))
    assert code == 2 and "unknown key(s) methd" in err


def test_console_script_entry_point(wavs, model_dirs):
    p = subprocess.run([sys.executable, "-m", "streamdec", "transcribe", wavs[0], "--model",
                        str(model_dirs["lstm"]), "--stats"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "real-time factor" in p.stderr


def test_channel_of_a_stereo_call(capsys, model_dirs, tmp_path):
    left, right = test_audio(3.0, seed=90), test_audio(3.0, seed=91)
    stereo = tmp_path / "call.wav"
    sf.write(str(stereo), np.stack([left, right], axis=1), 16000)
    sf.write(str(tmp_path / "right.wav"), right, 16000)
    model = str(model_dirs["zipformer2"])
    _, both, _ = run_cli(capsys, "transcribe", str(stereo), "--model", model)
    _, ch1, _ = run_cli(capsys, "transcribe", str(stereo), "--model", model, "--channel", "1")
    _, mono, _ = run_cli(capsys, "transcribe", str(tmp_path / "right.wav"), "--model", model)
    assert ch1 == mono and ch1 != both
    code, _, err = run_cli(capsys, "transcribe", str(stereo), "--model", model, "--channel", "2")
    assert code == 1 and "has 2 channel(s), no channel 2" in err


def test_realtime_jsonl_streams_events_and_reports_bad_files(capsys, wavs, model_dirs, tmp_path):
    code, out, err = run_cli(capsys, "transcribe", str(tmp_path / "missing.wav"), wavs[0],
                             "--model", str(model_dirs["zipformer2"]), "--realtime",
                             "--format", "jsonl")
    assert code == 1 and "missing.wav: audio file not found" in err
    events = [json.loads(line) for line in out.splitlines()]
    assert events and events[-1]["is_eof"]
