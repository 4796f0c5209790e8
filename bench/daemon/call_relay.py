"""What linking the workers' call hubs costs (``serve --workers N``): the CPU per call message
published, A/B alternated in one process on the server's event loop (uvloop where installed):

- ``local``: a subscriber on the call's own hub (what one process does);
- ``forwarded``: the subscriber on another worker's hub, over real ``CallRelay`` links (Unix
  sockets): the sending and the receiving side together;
- ``unwatched``: the hubs linked, nobody watching the call (nothing is sent).

Each message is a partial result of the size a call's leg sends (a sentence, its tokens and
words). Reports medians and min/max over ``--runs`` of microseconds of CPU per message,
and ``forwarded / local``.

    python bench/daemon/call_relay.py --messages 50000 --runs 5 --out call-relay.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamdec.server.call_relay import CallRelay  # noqa: E402
from streamdec.server.config import ServerConfig  # noqa: E402
from streamdec.server.run import run_loop  # noqa: E402
from streamdec.server.subscribers import CallHub  # noqa: E402

TEXT = "MY ACCOUNT NUMBER IS FOUR FIVE SIX"
MESSAGE = {"type": "result", "call_id": "c", "protocol": "twilio", "leg": "inbound",
           "channel": 0, "segment": 3, "text": TEXT, "is_final": False, "is_eof": False,
           "start_time": 12.3, "end_time": 14.1, "tokens": list(TEXT),
           "words": [{"word": w, "start": 1.0, "end": 1.2, "conf": 0.9} for w in TEXT.split()]}
MODES = ("local", "forwarded", "unwatched")


async def measure(mode: str, messages: int) -> float:
    """Microseconds of this process's CPU per message published in ``mode``."""
    with tempfile.TemporaryDirectory() as folder:
        hubs = [CallHub(ServerConfig(subscriber_queue=messages + 10)) for _ in range(2)]
        relays = [CallRelay(hub, folder, n, 2) for n, hub in enumerate(hubs)]
        for hub, relay in zip(hubs, relays):
            hub.links = relay
        for relay in reversed(relays):
            await relay.start()
        while not all(relay.peers for relay in relays):
            await asyncio.sleep(0.01)
        hubs[0].begin("c", {"type": "call_start", "call_id": "c"})
        sub = None
        if mode != "unwatched":
            hub = hubs[0 if mode == "local" else 1]
            sub = hub.subscribe("c")
            await hub.in_step(sub)  # (at once on the call's own hub)
            sub.take()
        began = time.process_time()
        for n in range(messages):
            hubs[0].publish("c", MESSAGE)
            if n % 100 == 99:
                await asyncio.sleep(0)  # the links' reads and writes run meanwhile
        while sub is not None and len(sub.messages) < messages:
            await asyncio.sleep(0.001)
        cpu = time.process_time() - began
        for relay in relays:
            await relay.close()
    return cpu / messages * 1e6


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("call-relay.json"))
    args = ap.parse_args()
    results: dict[str, list[float]] = {mode: [] for mode in MODES}

    async def run() -> int:
        for n in range(args.runs):  # A/B alternated, the order turned each run
            for mode in (MODES if n % 2 == 0 else MODES[::-1]):
                results[mode].append(await measure(mode, args.messages))
        return 0

    run_loop(run())
    report = {"setup": {"benchmark": "call_relay", "messages": args.messages,
                        "runs": args.runs, "message_bytes": len(json.dumps(MESSAGE)),
                        "unit": "us of CPU per message (one process: both workers' sides)"},
              "machine": {"cpu": platform.processor() or platform.machine(),
                          "python": platform.python_version()},
              "us_per_message": {mode: summary(v) for mode, v in results.items()}}
    report["forwarded_over_local"] = round(
        report["us_per_message"]["forwarded"]["median"]
        / report["us_per_message"]["local"]["median"], 2)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["us_per_message"]), report["forwarded_over_local"])


if __name__ == "__main__":
    main()
