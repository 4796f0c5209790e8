"""The transcript store's cost under load: ``bench/daemon/load.py`` A/B runs of
``streamdec serve`` with the store off (A) against SQLite (B), then off against PostgreSQL
(a real server from Debian's package, ``tests/postgres_utils.py``), same streams, same
audio, alternated. Each load report holds the p95 chunk latency, the finals' delivery
(late, lost), the server's CPU and the ratios; this script writes them side by side.

    python bench/daemon/store_cost.py --streams 200 --seconds 40 \\
        --out bench/results/2026-12-07-store-cost.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from postgres_utils import PostgresServer  # noqa: E402


def load(args, store: str, out: Path) -> dict:
    subprocess.run([sys.executable, str(REPO / "bench/daemon/load.py"), "--peer", "streamdec",
                    "--server-arg=--store", "--server-arg=off", "--b-arg=--store",
                    f"--b-arg={store}", "--streams", str(args.streams), "--seconds",
                    str(args.seconds), "--warmup", str(args.warmup), "--runs", str(args.runs),
                    "--out", str(out)], check=True)
    return json.loads(out.read_text())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=200)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    report = {"what": "streamdec serve with the transcript store off (streamdec) against on "
                      "(streamdec_b), bench/daemon/load.py A/B", "streams": args.streams,
              "seconds": args.seconds}
    with tempfile.TemporaryDirectory() as tmp:
        report["sqlite"] = load(args, f"sqlite:///{tmp}/cost.sqlite3", Path(tmp) / "s.json")
        with PostgresServer() as pg:
            report["postgresql"] = load(args, pg.url, Path(tmp) / "p.json")
    text = json.dumps(report, indent=1)
    for secret in (tmp,):  # the report names no path of the machine that ran it
        text = text.replace(secret, "<tmp>")
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
