"""The fuzz targets of bench/fuzz/ in CI: each committed seed and each input that once
crashed a target (bench/fuzz/crashes/TARGET/, replayed after its fix) goes through its
target; and a smoke run of the campaign's runner (``run.py``, 2 s a target, two at a
time) gets a report with inputs tried, coverage and no failure for every target. The
long campaign (bench/results/2026-12-04-hostile-clients-and-fuzzing/fuzz-campaign.json)
never runs here."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "bench" / "fuzz"
sys.path.insert(0, str(FUZZ))

#: every target, one a door or file format (a new fuzz_*.py must be added here)
TARGETS = ("archive", "assemblyai", "audiofork", "audiosocket", "catalog", "config", "deepgram",
           "multipart", "onnx_meta", "pcm", "realtime", "sherpa", "tokens", "twilio", "vosk")
CRASHES = sorted(p for p in (FUZZ / "crashes").glob("*/*") if p.is_file())


def test_every_target_is_listed_and_has_seeds():
    assert tuple(sorted(p.stem.removeprefix("fuzz_") for p in FUZZ.glob("fuzz_*.py"))) == TARGETS
    for target in TARGETS:
        assert len(list((FUZZ / "corpus" / target).iterdir())) >= 2, target


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus_replays_through_its_target(target):
    test_one_input = importlib.import_module(f"fuzz_{target}").TestOneInput
    seeds = sorted((FUZZ / "corpus" / target).iterdir())
    for seed in seeds:
        test_one_input(seed.read_bytes())  # raises on a crash or a broken invariant


@pytest.mark.parametrize("crash", CRASHES, ids=lambda p: f"{p.parent.name}/{p.name[:14]}")
def test_crash_found_by_the_campaign_is_fixed(crash):
    importlib.import_module(f"fuzz_{crash.parent.name}").TestOneInput(crash.read_bytes())


def test_crashes_kept_are_the_ones_found():
    assert [f"{p.parent.name}/{p.name}" for p in CRASHES] == [
        "onnx_meta/crash-f81bc81da376fc931d4a2cd984fdea92eb539545"]


#: the runner's smoke fuzzes three targets (every target's seeds replay above): a parser of
#: text, one of binary frames, one of files
SMOKE_TARGETS = ("config", "twilio", "onnx_meta")


@pytest.mark.slow
def test_runner_smoke_targets_run_and_report(tmp_path):
    out = tmp_path / "report.json"
    run = subprocess.run([sys.executable, str(FUZZ / "run.py"), "--seconds", "2", "--jobs", "2",
                          "--timeout", "20", "--targets", *SMOKE_TARGETS, "--out", str(out)],
                         capture_output=True, text=True, timeout=240)
    report = json.loads(out.read_text())
    assert run.returncode == 0, run.stdout + run.stderr
    assert [t["target"] for t in report["targets"]] == list(SMOKE_TARGETS)
    for t in report["targets"]:
        assert t["inputs"] > 0 and t["cov"] > 0 and t["ft"] >= t["cov"], t
        assert t["crashes"] == t["hangs"] == t["ooms"] == [], t
        assert 0 < t["peak_rss_mb"] < 2048, t
