import io
import json
import re
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
    assert [line.split(": ", 1)[0] for line in lines] == wavs  # each line names its file
    # each line equals transcribing that file alone, which prints the bare text
    code, alone, _ = run_cli(capsys, "transcribe", wavs[2], "--model", str(model_dirs["lstm"]),
                             "--no-endpoint")
    assert alone.strip() and lines[2] == f"{wavs[2]}: {alone.strip()}"


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
    assert f"{tmp_path}: no encoder network (encoder.onnx or encoder-*.onnx)" in err


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


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Good and bad inputs, in the order given to one run: (name, path) pairs."""
    d = tmp_path_factory.mktemp("mixed")
    # short, so that --realtime (paced as live) stays quick
    sf.write(str(d / "good0.wav"), test_audio(1.0, seed=70), 16000, subtype="PCM_16")
    sf.write(str(d / "whole.flac"), test_audio(2.5, seed=71), 16000, subtype="PCM_16")
    data = (d / "whole.flac").read_bytes()
    (d / "cut.flac").write_bytes(data[:len(data) // 2])  # like `head -c N x.flac`
    audio = test_audio(2.0, seed=72)
    audio[int(1.05 * 16000)] = np.nan
    sf.write(str(d / "nan.wav"), audio, 16000, subtype="FLOAT")
    (d / "folder").mkdir()
    sf.write(str(d / "whole.wav"), test_audio(1.0, seed=73), 16000, subtype="PCM_16")
    (d / "short.wav").write_bytes((d / "whole.wav").read_bytes()[:44 + 16000])  # 0.5 s of 1
    sf.write(str(d / "loud.wav"), test_audio(1.5, seed=74) * 1000, 16000, subtype="FLOAT")
    sf.write(str(d / "good1.flac"), test_audio(1.0, seed=75), 16000, subtype="PCM_16")
    return [(name, str(d / name)) for name in ("good0.wav", "cut.flac", "nan.wav", "folder",
                                                "short.wav", "loud.wav", "good1.flac")]


@pytest.mark.parametrize("mode", [[], ["--batch-size", "1"], ["--realtime"]],
                         ids=["batch", "batch-size-1", "realtime"])
def test_each_bad_file_fails_alone(capsys, mixed, model_dirs, mode):
    model = ["--model", str(model_dirs["lstm"]), "--no-endpoint"]
    paths = dict(mixed)
    code, out, err = run_cli(capsys, "transcribe", *paths.values(), *model, *mode)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("streamdec: ")]
    assert len(errors) == 5, err
    damaged = "; the transcript covers the audio before it"
    assert errors[0].startswith(f"streamdec: error: {paths['cut.flac']}: unreadable after ")
    assert errors[0].endswith(f" s (flac decoder lost sync){damaged}")
    assert errors[1].startswith(f"streamdec: error: {paths['nan.wav']}: unusable samples after ")
    assert errors[1].endswith(f" s (samples contain NaN or infinity){damaged}")
    assert errors[2] == f"streamdec: error: {paths['folder']}: is a directory, not an audio file"
    assert errors[3] == (f"streamdec: warning: {paths['short.wav']}: its header promises 1.00 s "
                         "of audio but it holds 0.50 s; transcribed what is there")
    assert errors[4].startswith(f"streamdec: error: {paths['loud.wav']}: unusable samples after "
                                "0.00 s (float samples must lie in [-1, 1] (overshoot up to 2 "
                                "is clipped), got a peak of ")
    # stdout: a line for every file with a transcript (complete, or up to its damage); none
    # for the files that failed
    lines = out.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        paths[n] for n in ("good0.wav", "cut.flac", "nan.wav", "short.wav", "good1.flac")]
    assert all(line.split(": ", 1)[1] for line in lines), "the test model emitted nothing"
    for n in ("good0.wav", "short.wav", "good1.flac"):  # complete, as if transcribed alone
        _, alone, _ = run_cli(capsys, "transcribe", paths[n], *model)
        assert f"{paths[n]}: {alone.strip()}" in lines


def test_a_file_short_of_its_header_alone_is_a_warning_and_exit_0(capsys, mixed, model_dirs):
    short = dict(mixed)["short.wav"]
    code, out, err = run_cli(capsys, "transcribe", short, "--model", str(model_dirs["lstm"]))
    assert code == 0 and out.strip()
    assert err == (f"streamdec: warning: {short}: its header promises 1.00 s of audio but it "
                   "holds 0.50 s; transcribed what is there\n")


def test_real_transcript_of_a_truncated_flac(capsys, tmp_path):
    """The built-in model: a FLAC cut like `head -c` keeps the transcript of its start.
    Greedy search, because it never revises a word once the audio after it arrives (a beam
    search with words may, so its words before the cut need not be the full file's)."""
    flac = tmp_path / "hello.flac"
    sf.write(str(flac), sf.read("examples/hello.wav", dtype="int16")[0], 16000, subtype="PCM_16")
    cut = tmp_path / "cut.flac"
    cut.write_bytes(flac.read_bytes()[:int(flac.stat().st_size * 0.6)])
    code, out, err = run_cli(capsys, "transcribe", "examples/hello.wav", str(cut),
                             "--search", "greedy")
    assert code == 1
    assert re.search(f"{re.escape(str(cut))}: unreadable after [0-9]+.00 s \\(flac decoder lost "
                     "sync\\); the transcript covers the audio before it", err), err
    full, partial = [line.split(": ", 1)[1].split() for line in out.splitlines()]
    assert len(full) >= 10 and 4 <= len(partial) < len(full)
    assert partial[:-1] == full[:len(partial) - 1]  # all but the word at the cut


def test_one_file_prints_bare_text_and_several_prefix_it(capsys, wavs, model_dirs):
    model = ["--model", str(model_dirs["lstm"]), "--no-endpoint"]
    _, one, _ = run_cli(capsys, "transcribe", wavs[0], *model)
    _, two, _ = run_cli(capsys, "transcribe", wavs[0], wavs[1], *model)
    assert one.strip() and ": " not in one
    assert two.splitlines()[0] == f"{wavs[0]}: {one.strip()}"


@pytest.mark.parametrize("inputs, fmt, clash", [
    (["a/x.wav", "b/x.wav"], "text", ("a/x.wav", "b/x.wav", "x.txt")),
    (["x.wav", "x.flac"], "srt", ("x.wav", "x.flac", "x.srt")),
    (["y.wav", "X.wav", "x.mp3"], "vtt", ("X.wav", "x.mp3", "x.vtt")),  # case-blind systems
    (["x.wav", "x.wav"], "jsonl", ("x.wav", "x.wav", "x.jsonl")),
    (["stdin.wav", "-"], "text", ("stdin.wav", "-", "stdin.txt")),
])
def test_output_dir_refuses_colliding_names_before_decoding(capsys, tmp_path, inputs, fmt,
                                                          clash):
    out_dir = tmp_path / "out"
    # a model that does not exist: the check comes before the model is loaded
    code, out, err = run_cli(capsys, "transcribe", *inputs, "--format", fmt, "--output-dir",
                             str(out_dir), "--model", str(tmp_path / "no-model"))
    a, b, name = clash
    assert code == 2 and out == ""
    assert err == (f"streamdec: error: --output-dir: {a} and {b} would both be written to "
                   f"{out_dir / name}\n")
    assert not out_dir.exists()


@pytest.mark.parametrize("argv, message", [
    (["a.wav", "-", "-"], "standard input (-) can be read only once"),
    (["a.wav", "--raw-encoding", "mulaw"], "--raw-encoding needs --raw-rate"),
    (["a.wav", "--raw-rate", "0"], "raw PCM: the sample rate must be a positive integer, got 0"),
    (["a.wav", "--batch-size", "0"], "--batch-size must be >= 1"),
])
def test_unusable_input_options(capsys, tmp_path, argv, message):
    code, out, err = run_cli(capsys, "transcribe", *argv, "--model", str(tmp_path))
    assert code == 2 and out == "" and err == f"streamdec: error: {message}\n"


def telephone_files(folder, sox_type: str = "ul"):
    """hello.wav as a raw 8 kHz G.711 file (sox: ``ul`` mu-law, ``al`` A-law) and the same
    samples as a WAV."""
    coded = folder / f"hello.{sox_type}"
    subprocess.run(["sox", "-D", "examples/hello.wav", "-r", "8000", "-t", sox_type,
                    str(coded)], check=True)
    subprocess.run(["sox", "-t", sox_type, "-r", "8000", "-c", "1", str(coded),
                    str(folder / f"hello8k-{sox_type}.wav")], check=True)
    return coded, folder / f"hello8k-{sox_type}.wav"


@pytest.fixture(scope="module")
def telephone(tmp_path_factory):
    """hello.wav as a raw 8 kHz mu-law .ul file (sox) and the same samples as a WAV."""
    return telephone_files(tmp_path_factory.mktemp("ul"))


@pytest.mark.parametrize("encoding, sox_type", [("mulaw", "ul"), ("alaw", "al")])
def test_raw_g711_file(capsys, tmp_path, encoding, sox_type):
    coded, wav = telephone_files(tmp_path, sox_type)
    code, out, err = run_cli(capsys, "transcribe", str(coded), "--raw-rate", "8000",
                             "--raw-encoding", encoding)
    assert code == 0, err
    _, ref, _ = run_cli(capsys, "transcribe", str(wav))
    assert len(out.split()) >= 10 and out == ref


def test_raw_mulaw_on_standard_input(capsys, monkeypatch, telephone):
    ul, wav = telephone
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(ul.read_bytes())))
    code, out, err = run_cli(capsys, "transcribe", "-", "--raw-rate", "8000", "--raw-encoding",
                             "mulaw", "--format", "jsonl")
    assert code == 0, err
    _, ref, _ = run_cli(capsys, "transcribe", str(wav), "--format", "jsonl")
    events = [json.loads(line) for line in out.splitlines()]
    assert {e["file"] for e in events} == {"-"}
    assert [{**e, "file": ""} for e in events] == [
        {**json.loads(line), "file": ""} for line in ref.splitlines()]


def test_piped_wav_on_standard_input():
    """A real pipe from a streaming writer (sox, like ffmpeg, cannot fill in the WAV's
    length and writes a placeholder): the same transcript as the file."""
    sox = subprocess.Popen(["sox", "examples/hello.wav", "-t", "raw", "-"],
                           stdout=subprocess.PIPE)
    wav = subprocess.Popen(["sox", "-t", "raw", "-r", "16000", "-e", "signed", "-b", "16", "-c",
                            "1", "-", "-t", "wav", "-"], stdin=sox.stdout,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    sox.stdout.close()
    p = subprocess.run([sys.executable, "-m", "streamdec", "transcribe", "-", "--format", "srt"],
                       stdin=wav.stdout, capture_output=True, text=True, timeout=120)
    wav.stdout.close()
    assert p.returncode == 0 and p.stderr == "", p.stderr
    ref = subprocess.run([sys.executable, "-m", "streamdec", "transcribe", "examples/hello.wav",
                          "--format", "srt"], capture_output=True, text=True, timeout=120)
    assert p.stdout == ref.stdout and p.stdout.count(" --> ") >= 2


def test_version(capsys):
    from streamdec import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"streamdec {__version__}\n"


def help_entries(argv: list[str], capsys) -> dict[str, str]:
    """Option -> its whole help entry (unwrapped), from ``--help``."""
    with pytest.raises(SystemExit):
        main(argv + ["--help"])
    entries: dict[str, str] = {}
    option = None
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  -"):
            option = line.split()[0].rstrip(",")
            entries[option] = line
        elif option and line.startswith("   "):
            entries[option] += line
        else:
            option = None
    return {o: " ".join(text.split()) for o, text in entries.items()}


def test_help_shows_every_default_and_that_hotwords_need_a_beam_search(capsys):
    entries = help_entries(["transcribe"], capsys)
    flags = {"-h", "--realtime", "--stats", "--int8", "--no-endpoint"}  # off unless given
    assert flags < set(entries)
    for option, text in entries.items():
        assert option in flags or "default: " in text, text
    assert "(default: None)" not in " ".join(entries.values())
    for option, default in [("--format", "text"), ("--batch-size", "8"), ("--backend", "onnx"),
                            ("--num-threads", "1"), ("--beam", "16 with words, else 4"),
                            ("--blank-penalty", "0"), ("--hotwords-score", "1"),
                            ("--raw-encoding", "s16le")]:
        assert f"default: {default})" in entries[option], entries[option]
    # the one default search: the model's words where it ships them, else greedy
    assert "(default: the model's words" in entries["--search"], entries["--search"]
    assert entries["--search"].endswith("; else greedy)"), entries["--search"]
    assert ("hotwords need a beam search (--search modified_beam, alsd, tsd, beam, nsc), not "
            "greedy") in entries["--hotwords-file"]
