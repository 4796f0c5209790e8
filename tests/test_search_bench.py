"""The search benchmark's smoke mode runs end to end and writes the documented report."""

import json
import subprocess
import sys
from pathlib import Path

from streamdec.search import SEARCH_METHODS

REPO = Path(__file__).resolve().parents[1]


def test_bench_search_smoke(tmp_path):
    out = tmp_path / "report.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "search.py"), "--smoke", "--out",
                    str(out)], check=True, capture_output=True, timeout=120)
    report = json.loads(out.read_text())
    assert set(report["searches"]) == set(SEARCH_METHODS)
    for row in report["searches"].values():
        assert {"wer", "cer", "rtf", "throughput_b2", "rtf_vs_sherpa_greedy",
                "rtf_vs_sherpa_modified_beam"} <= set(row)
        assert row["rtf"] > 0 and row["throughput_b2"] > 0
    assert set(report["sherpa_onnx"]) == {"greedy_search", "modified_beam_search"}
