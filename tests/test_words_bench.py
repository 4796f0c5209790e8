"""bench/accuracy/words.py runs end to end on a few dev utterances and writes the documented report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_words_small_run(tmp_path):
    out = tmp_path / "report.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "words.py"), "--limit", "2",
                    "--timing-utts", "2", "--runs", "1", "--rows", "accurate,accurate_no_lm",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert list(report["rows"]) == ["accurate", "accurate_no_lm"]
    for row in report["rows"].values():
        for name in ("espeak", "flite", "espeak8k"):
            assert row[name]["utts"] == 2 and 0 <= row[name]["wer"]
        assert row["rtf"] > 0 and row["rtf_vs_no_lm"] > 0
    assert report["rows"]["accurate"]["search"]["lang_dir"] == "lang"
    assert report["rows"]["accurate_no_lm"]["rtf_vs_no_lm"] == 1.0
    # the ratio is the row's reported RTF over the no-LM row's, rounded to 2 decimals
    accurate, no_lm = report["rows"]["accurate"], report["rows"]["accurate_no_lm"]
    assert accurate["rtf_vs_no_lm"] == round(accurate["rtf"] / no_lm["rtf"], 2)
