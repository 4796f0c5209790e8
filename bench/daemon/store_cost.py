"""The transcript store's cost: per final (the ``Recorder`` alone, SQLite and PostgreSQL,
each final committed alone and many together), and under load: ``bench/daemon/load.py``
A/B runs of
``streamdec serve`` with the store off (A) against SQLite (B), then off against PostgreSQL
(a real server from Debian's package, ``tests/postgres_utils.py``), same streams, same
audio, alternated. Each load report holds the p95 chunk latency, the finals' delivery
(late, lost), the server's CPU and the ratios; this script writes them side by side.

    python bench/daemon/store_cost.py --streams 200 --seconds 40 \\
        --out bench/results/2026-12-07-store-cost/store-cost.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from postgres_utils import PostgresServer  # noqa: E402


def per_final(url: str, finals: int) -> dict:
    """The store's own cost per final, through the ``Recorder`` as the server uses it: each
    final awaited alone (a commit each: one stream at a time), then ``finals`` at once
    (group commit: many streams' finals together); wall time and this process's CPU."""
    import asyncio

    from streamdec.core.results import Word
    from streamdec.records import FinalRecord, Recorder, SessionRecord, StoreConfig
    from streamdec.records.store import process_owner

    words = tuple(Word(w, n * 0.3, n * 0.3 + 0.25, 0.9) for n, w in
                  enumerate("please call me back tomorrow morning".split()))

    def final(record_id: str, n: int) -> FinalRecord:
        return FinalRecord(record_id, "0", 0, n, n * 3.0, n * 3.0 + 2.0,
                           "PLEASE CALL ME BACK TOMORROW MORNING", words,
                           "Please call me back tomorrow morning.", words)

    async def main() -> dict:
        recorder = Recorder.open(StoreConfig(url=url))
        recorder.start()
        out = {}
        for mode in ("one_at_a_time", "together"):
            record_id = f"{mode}-{time.time_ns()}"
            recorder.begin(SessionRecord(record_id, "stream", record_id, "bench", time.time(),
                                         process_owner()))
            wall, cpu = time.perf_counter(), time.process_time()
            if mode == "one_at_a_time":
                for n in range(finals):
                    assert await recorder.final(final(record_id, n))
            else:
                assert all(await asyncio.gather(*[recorder.final(final(record_id, n))
                                                  for n in range(finals)]))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            out[mode] = {"finals": finals, "ms_per_final": round(wall / finals * 1000, 3),
                         "cpu_ms_per_final": round(cpu / finals * 1000, 3)}
        await recorder.close()
        return out

    return asyncio.run(main())


def load(args, store: str, out: Path) -> dict:
    subprocess.run([sys.executable, str(REPO / "bench/daemon/load.py"), "--peer", "streamdec",
                    "--server-arg=--store", "--server-arg=off", "--b-arg=--store",
                    f"--b-arg={store}", "--streams", str(args.streams), "--seconds",
                    str(args.seconds), "--warmup", str(args.warmup), "--runs", str(args.runs),
                    "--out", str(out)], check=True)
    return json.loads(out.read_text())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=200, help="0: the per-final cost only")
    p.add_argument("--finals", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    report = {"what": "streamdec serve with the transcript store off (streamdec) against on "
                      "(streamdec_b), bench/daemon/load.py A/B", "streams": args.streams,
              "seconds": args.seconds}
    with tempfile.TemporaryDirectory() as tmp:
        with PostgresServer() as pg:
            report["per_final"] = {"sqlite": per_final(f"sqlite:///{tmp}/micro.sqlite3",
                                                       args.finals),
                                   "postgresql": per_final(pg.url, args.finals)}
            print(json.dumps(report["per_final"]), flush=True)
            if args.streams:
                report["postgresql"] = load(args, pg.url, Path(tmp) / "p.json")
        if args.streams:
            report["sqlite"] = load(args, f"sqlite:///{tmp}/cost.sqlite3",
                                    Path(tmp) / "s.json")
    text = json.dumps(report, indent=1)
    for secret in (tmp,):  # the report names no path of the machine that ran it
        text = text.replace(secret, "<tmp>")
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
