"""``bench/daemon/hostile.py`` at a small size (5 healthy streams, 3 connections of each
misbehaviour, 20 subscribers of calls that never come, a 2 s idle timeout): a real server,
the documented report, and its verdicts: the healthy finals identical to the quiet run's
and on time, the RSS within its bound, the descriptors back at baseline, every hostile
connection ended as documented within its limit, no traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.daemon.hostile import KINDS  # noqa: E402

PER_KIND = 3
SUBSCRIBERS = 20


@pytest.mark.slow
def test_hostile_smoke(tmp_path):
    out = tmp_path / "hostile.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "daemon" / "hostile.py"), "--out", str(out),
         "--healthy", "5", "--seconds", "10", "--per-kind", str(PER_KIND),
         "--subscribers", str(SUBSCRIBERS), "--idle-timeout", "2", "--settle", "10"],
        capture_output=True, text=True, timeout=240)
    report = json.loads(out.read_text())
    assert done.returncode == (0 if report["passed"] else 1), done.stderr[-3000:]
    assert report["verdicts"] == {"healthy": True, "rss": True, "fds": True, "kinds": True,
                                  "server": True}, json.dumps(report, indent=1)[:6000]
    healthy = report["healthy"]
    assert healthy["finals_identical"] is True and healthy["late"] == 0
    for run in ("quiet", "hostile"):
        assert healthy[run]["clients"] == 5
        assert healthy[run]["finals"] == healthy[run]["utterances"] >= 5
        assert healthy[run]["lost"] == healthy[run]["unfinished"] == 0
    assert set(report["hostile"]) == {*KINDS, "subscriber"}
    for kind in KINDS:
        v = report["hostile"][kind]
        assert v["count"] == v["as_expected"] == PER_KIND, (kind, v)
        assert v["seconds_to_close"]["max"] <= v["limit_seconds"], (kind, v)
    assert report["hostile"]["subscriber"]["ended"] == {"waited": SUBSCRIBERS}
    fds = report["fds"]
    assert fds["after"] <= fds["baseline"] < fds["hostile_peak"]
    rss = report["rss_mb"]
    assert rss["hostile_peak"] <= rss["bound"]
    assert report["server"] == {"exit_status": 0, "tracebacks": 0,
                                "log_lines": report["server"]["log_lines"]}
