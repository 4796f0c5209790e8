"""The real-voice benchmark (bench/realvoice.py) runs end to end on two files of its dev set
(one of pocketsphinx-testdata, one of alsa-utils: both Debian packages, installed by
scripts/install-test-deps.sh) and writes the documented report. Its WER numbers are the
benchmark's business; the test checks the report's shape and the counts that must hold
whatever the model: files, utterances per part, lead-ins per file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from realvoice import SHIFTS_MS, real_dev_set  # noqa: E402


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
    subprocess.run([sys.executable, str(REPO / "bench" / "realvoice.py"), "--out", str(out),
                    "--files", "cards/001,alsa/Front_Center", "--methods", "greedy",
                    "--shift-methods", "greedy"], check=True, capture_output=True, timeout=300)
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
