"""The real-voice benchmark (bench/accuracy/realvoice.py) runs end to end on two files of its dev set
(one of pocketsphinx-testdata, one of alsa-utils: both Debian packages, installed by
scripts/install-test-deps.sh) and writes the documented report. Its WER numbers are the
benchmark's business; the test checks the report's shape and the counts that must hold
whatever the model: files, utterances per part, lead-ins per file, and (``--synthetic``)
utterances per synthetic dev set; ``--heldout DIR`` on a made-up folder of two of the dev
files must score exactly as those files do in the dev set. ``--capture`` runs on
the same two files through a PulseAudio null sink (bench/captions/null_sink.py) and checks its
report the same way; without PulseAudio's tools it must fail, naming the packages."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.accuracy.realvoice import SHIFTS_MS, real_dev_set  # noqa: E402


def test_the_dev_set_reads_every_file_with_its_transcript():
    utts = {u.utt: u for u in real_dev_set()}
    assert len(utts) == 20
    assert [u.split("/")[0] for u in utts].count("librivox") == 5
    assert utts["cards/001"].text == "ten of clubs"
    assert utts["librivox/sense_and_sensibility_01_austen_64kb-0880"].text == \
        "he was not an ill disposed young man"
    assert utts["goforward/goforward"].text == "go forward ten meters"
    assert utts["digits/dhd.2934z"].text == "two nine three four zero"
    assert utts["alsa/Rear_Left"].text == "rear left" and utts["alsa/Rear_Left"].rate == 48000
    assert utts["goforward/goforward"].rate == 16000
    assert len(utts["goforward/goforward"].samples) == 89160 // 2  # 16-bit raw


@pytest.mark.slow
def test_realvoice_smoke(tmp_path):
    out = tmp_path / "realvoice.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "realvoice.py"), "--out", str(out),
                    "--files", "cards/001,alsa/Front_Center", "--methods", "greedy",
                    "--shift-methods", "greedy", "--synthetic", "--synthetic-limit", "2"],
                   check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert report["files"] == 2 and report["threads"] == 1
    assert list(report["methods"]) == ["greedy"]
    row = report["methods"]["greedy"]
    for key in ("wer", "wer_8k"):
        assert {p: r["utts"] for p, r in row[key].items()} == {"all": 2, "cards": 1, "alsa": 1}
        assert all(0 <= r["wer"] and 0 <= r["cer"] for r in row[key].values())
    assert set(row["shift"]["distinct"]) == {"cards/001", "alsa/Front_Center"}
    assert all(1 <= n <= len(SHIFTS_MS) for n in row["shift"]["distinct"].values())
    assert row["rtf"] > 0 and row["streams_per_core"] > 0
    assert {name: {m: r["utts"] for m, r in rows.items()} for name, rows in report["synthetic"].items()} \
        == {"espeak": {"greedy": 2}, "flite": {"greedy": 2}, "espeak8k": {"greedy": 2}}


@pytest.mark.slow
def test_capture_path_stability(tmp_path):
    """``--capture``: both files through the PulseAudio null sink (pulseaudio,
    pulseaudio-utils, libasound2-plugins, libportaudio2: scripts/install-test-deps.sh) and
    ``streamdec mic``, against the files decoded directly. A missing tool fails the run."""
    out = tmp_path / "realvoice.json"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "realvoice.py"), "--out", str(out),
                          "--files", "cards/001,alsa/Front_Center", "--methods", "greedy",
                          "--shift-methods", "", "--no-timing", "--capture"],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    cap = report["capture"]
    assert cap["method"] == "greedy" and cap["sink_rate"] == 48000
    assert cap["lead_in_seconds"] == 0.3 and cap["files"] == 2
    assert len(cap["capture_rates"]) == 1 and isinstance(cap["capture_rates"][0], int)
    rows = cap["per_file"]
    assert list(rows) == ["cards/001", "alsa/Front_Center"]
    assert {u: r["file_rate"] for u, r in rows.items()} == {"cards/001": 16000,
                                                            "alsa/Front_Center": 48000}
    for r in rows.values():
        assert r["equal"] == (r["captured"] == r["file"])
        assert r["captured"] and r["file"]  # speech came through the sink
        assert isinstance(r["overruns"], int) and isinstance(r["dropped_blocks"], int)
        assert r["overruns"] >= 0 and r["dropped_blocks"] >= 0
    identical = sum(r["equal"] for r in rows.values())
    assert cap["identical"] == identical and cap["share_identical"] == identical / 2
    assert cap["files_with_lost_audio"] == sum(bool(r["overruns"] or r["dropped_blocks"])
                                               for r in rows.values())
    for key in ("wer_captured", "wer_file"):
        assert {p: r["utts"] for p, r in cap[key].items()} == {"all": 2, "cards": 1, "alsa": 1}
    # the file side is the benchmark's own greedy decode of the same files
    assert cap["wer_file"] == report["methods"]["greedy"]["wer"]
    assert f"identical {identical}/2 " in run.stderr


def _heldout_folder(folder: Path, names: list[str]) -> dict:
    """A made-up dev set folder holding these real dev files under new ids, as written by
    make_dev.py (refs.tsv and 16-bit UTT.wav at the file's own rate): utt -> dev id."""
    import soundfile as sf

    folder.mkdir()
    utts = {u.utt: u for u in real_dev_set(names)}
    ids = {f"spk{i}-{n.split('/')[1]}": n for i, n in enumerate(names)}
    for utt, name in ids.items():
        sf.write(folder / f"{utt}.wav", utts[name].samples, utts[name].rate, subtype="PCM_16")
    (folder / "refs.tsv").write_text("".join(f"{utt}\t{utts[n].text.upper()}\n"
                                             for utt, n in ids.items()))
    return ids


def test_heldout_folder_scored_like_the_same_files_of_the_dev_set(tmp_path):
    """``--heldout DIR``: the methods scored on a folder of refs.tsv + UTT.wav. The folder
    holds the two dev files the run also decodes (16-bit, as read): its error rates must be
    those of the dev set's ``all`` exactly."""
    names = ["cards/001", "alsa/Front_Center"]
    ids = _heldout_folder(tmp_path / "held", names)
    out = tmp_path / "realvoice.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "realvoice.py"), "--out", str(out),
                    "--files", ",".join(names), "--methods", "greedy,modified_beam",
                    "--shift-methods", "", "--no-timing", "--heldout", str(tmp_path / "held")],
                   check=True, capture_output=True, timeout=240)
    report = json.loads(out.read_text())
    assert list(ids) == ["spk0-001", "spk1-Front_Center"]
    assert report["heldout_dir"] == str(tmp_path / "held")
    assert list(report["heldout"]) == ["greedy", "modified_beam"]
    for m, row in report["heldout"].items():
        assert row == {**report["methods"][m]["wer"]["all"], "utts": 2}


def test_heldout_folder_missing_a_wav_fails_naming_it(tmp_path):
    folder = tmp_path / "held"
    _heldout_folder(folder, ["cards/001"])
    with open(folder / "refs.tsv", "a") as f:
        f.write("spk9-gone\tGONE\n")
    run = subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "realvoice.py"), "--out",
                          str(tmp_path / "x.json"), "--heldout", str(folder)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert run.stderr == (f"{folder}: 1 of the 2 utterances of refs.tsv have no wav, first "
                          f"{folder / 'spk9-gone.wav'}\n")
    assert not (tmp_path / "x.json").exists()


def test_capture_without_pulseaudio_fails_saying_so(tmp_path):
    """No PulseAudio tools on PATH: --capture stops before decoding, naming the packages."""
    run = subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "realvoice.py"), "--capture",
                          "--out", str(tmp_path / "x.json"), "--methods", "greedy"],
                         env={**os.environ, "PATH": str(tmp_path)}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1
    assert run.stderr == ("--capture needs PulseAudio: pulseaudio, paplay, pactl not found; "
                          "apt-get install pulseaudio pulseaudio-utils libasound2-plugins "
                          "libportaudio2\n")
    assert not (tmp_path / "x.json").exists()
