"""bench/decode/vad.py runs end to end at a tiny size on the built-in model and writes its report.
Speed is the benchmark's business; the test checks the report's shape and the counts that
must hold on any machine (the VAD runs the encoder on fewer chunks of the call)."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_vad_bench_smoke(tmp_path):
    out = tmp_path / "vad.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "decode" / "vad.py"), "--out", str(out),
                    "--utterances", "4", "--repeat", "1"],
                   check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert report["setup"]["utterances"] == 4 and report["setup"]["channels"] == 2
    assert 0.4 < report["setup"]["silent_fraction"] < 0.9
    on, off = report["call"]["vad"], report["call"]["no_vad"]
    for run in (on, off):
        assert set(run) == {"decode_cpu_s", "encoder_cpu_s", "encoder_chunks",
                            "vad_network_cpu_s", "wer"}
    assert off["vad_network_cpu_s"] == 0.0 and on["vad_network_cpu_s"] > 0
    assert 0 < on["encoder_chunks"] < off["encoder_chunks"]
    assert set(report["call"]["ratios"]) == {"encoder_cpu_no_vad_over_vad",
                                             "decode_cpu_no_vad_over_vad",
                                             "encoder_chunks_vad_over_no_vad"}
    assert set(report["dev_wer"]) == {"no_vad", "vad"}
    assert set(report["vad_network_ms_per_audio_second"]) == {"1", "2", "16"}
