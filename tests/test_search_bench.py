"""The search benchmark's smoke mode runs end to end and writes the documented report."""

import json
import subprocess
import sys
from pathlib import Path

from streamdec.search import SEARCH_METHODS

REPO = Path(__file__).resolve().parents[1]


def test_bench_search_smoke(tmp_path):
    out = tmp_path / "report.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "search.py"), "--smoke", "--out",
                    str(out)], check=True, capture_output=True, timeout=120)
    report = json.loads(out.read_text())
    assert set(report["searches"]) == set(SEARCH_METHODS)
    # the smoke settings, as documented: 1 run of 2 timing utterances, batches of 2
    assert (report["runs"], report["timing_utterances"], report["batch"]) == (1, 2, 2)
    assert set(report["sherpa_onnx"]) == {"greedy_search", "modified_beam_search"}
    sherpa = report["sherpa_onnx"]
    for row in list(report["searches"].values()) + list(sherpa.values()):
        assert 0 <= row["cer"] and 0 <= row["wer"]
        assert row["rtf"] > 0 and row["throughput_b2"] > 0
    for row in report["searches"].values():
        assert {"wer", "cer", "rtf", "throughput_b2", "rtf_vs_sherpa_greedy",
                "rtf_vs_sherpa_modified_beam"} <= set(row)
        # each ratio is our RTF over sherpa-onnx's (both reported rounded to 4 decimals:
        # the tolerance is what that rounding can move the quotient, plus its own rounding)
        for ours, theirs in (("greedy", "greedy_search"),
                             ("modified_beam", "modified_beam_search")):
            quotient = row["rtf"] / sherpa[theirs]["rtf"]
            slack = 0.005 + quotient * (5e-5 / row["rtf"] + 5e-5 / sherpa[theirs]["rtf"])
            assert abs(row[f"rtf_vs_sherpa_{ours}"] - quotient) <= slack
