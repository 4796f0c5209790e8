"""The comparison benchmarks (throughput, overhead, latency) run end to end at a tiny size on
the built-in model and write the documented report. Their numbers are not checked: speed is
the benchmarks' business, not the tests'."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--seconds", "4", "--runs", "1", "--search", "greedy,modified_beam"]


def run_bench(script: str, out: Path, *args: str) -> dict:
    subprocess.run([sys.executable, str(REPO / "bench" / script), "--out", str(out), *args],
                   check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def check_configurations(report: dict, streams: list[int], drivers: tuple = ()) -> list[dict]:
    confs = report["configurations"]
    if drivers:
        assert [(c["search"], c["streams"], c["driver"]) for c in confs] == [
            (m, k, d) for m in ("greedy", "modified_beam") for k in streams for d in drivers]
    else:
        assert [(c["search"], c["streams"]) for c in confs] == [
            (m, k) for m in ("greedy", "modified_beam") for k in streams]
    for c in confs:
        assert {"streamdec", "sherpa_onnx", "ratio"} <= set(c)
        assert c["threads"] == 1
    assert {"cpu", "cores", "onnxruntime", "sherpa_onnx"} <= set(report["machine"])
    return confs


@pytest.mark.slow
def test_throughput_smoke(tmp_path):
    out = tmp_path / "throughput.json"
    report = run_bench("decode/throughput.py", out, "--streams", "1,2", "--profile", "2",
                       "--drivers", "recognizer,engine", *SMALL)
    confs = check_configurations(report, [1, 2], ("recognizer", "engine"))
    utts = report["setup"]["utterances"]
    assert utts >= 1
    for c in confs:
        assert c["utterances"] == utts
        assert set(c["streamdec"]) == {"median", "min", "max"}
        assert set(c["cpu_throughput"]) == {"streamdec", "sherpa_onnx", "ratio"}
        assert c["streamdec_runs_agree"] is True
        if c["search"] == "greedy":  # greedy gives sherpa-onnx's tokens and frames
            assert c["identical_transcripts"] == utts
    streamdec_digests = {c["transcripts_sha256"]["streamdec"] for c in confs
                         if c["search"] == "greedy"}
    assert len(streamdec_digests) == 1  # the same transcripts at every K, by either driver
    assert [(b["search"], b["streams"]) for b in report["best"]] == [
        (m, k) for m in ("greedy", "modified_beam") for k in (1, 2)]
    for method in ("greedy", "modified_beam"):
        assert "function calls" in (tmp_path / f"throughput.profile-{method}-k2.txt").read_text()


@pytest.mark.slow
def test_overhead_smoke(tmp_path):
    report = run_bench("decode/overhead.py", tmp_path / "overhead.json", "--streams", "2", *SMALL)
    for c in check_configurations(report, [2]):
        assert c["bare"]["calls"]["encoder"] >= 1 and c["bare"]["calls"]["joiner"] >= 1
        assert set(c["streamdec"]["seconds"]) == {"decode", "features", "encoder", "search",
                                                   "bookkeeping"}
        assert set(c["sherpa_onnx"]["seconds"]) == {"decode", "features"}
        assert set(c["streamdec"]["overhead"]) == {"median", "min", "max"}


@pytest.mark.slow
def test_throughput_alternates_the_arena_settings(tmp_path):
    """--cpu-arena on,off: one configuration per setting, each against the same sherpa-onnx
    runs; the arena changes no transcript."""
    report = run_bench("decode/throughput.py", tmp_path / "t.json", "--streams", "2",
                       "--profile", "0", "--cpu-arena", "on,off", "--seconds", "4", "--runs", "2",
                       "--search", "greedy")
    confs = report["configurations"]
    assert [c["cpu_arena"] for c in confs] == [True, False]
    assert confs[0]["sherpa_onnx"] == confs[1]["sherpa_onnx"]
    assert confs[0]["transcripts_sha256"] == confs[1]["transcripts_sha256"]
    assert report["setup"]["cpu_arena"] == [True, False]


@pytest.mark.slow
def test_throughput_alternates_the_state_settings(tmp_path):
    """--shared-states on,off: encoder states as rows of the batch and split out per stream,
    one configuration each against the same sherpa-onnx runs, with the same transcripts."""
    report = run_bench("decode/throughput.py", tmp_path / "t.json", "--streams", "3",
                       "--profile", "0", "--shared-states", "on,off", "--seconds", "6",
                       "--runs", "2", "--search", "greedy")
    confs = report["configurations"]
    assert [c["shared_states"] for c in confs] == [True, False]
    assert confs[0]["sherpa_onnx"] == confs[1]["sherpa_onnx"]
    assert confs[0]["transcripts_sha256"] == confs[1]["transcripts_sha256"]
    assert report["setup"]["shared_states"] == [True, False]


@pytest.mark.slow
def test_throughput_alternates_the_graph_settings(tmp_path):
    """--graph-rewrites on,off: the sessions' graphs rewritten and as the files are, one
    configuration each against the same sherpa-onnx runs, on a zipformer2 (32 depthwise
    convolutions rewritten)."""
    model = REPO / "tests" / "fixtures" / "published-layouts" / \
        "A-streaming-zipformer2-chunk-16-left-128"
    report = run_bench("decode/throughput.py", tmp_path / "t.json", "--streams", "2",
                       "--profile", "0", "--graph-rewrites", "on,off", "--seconds", "4",
                       "--runs", "2", "--search", "greedy", "--model-dir", str(model))
    confs = report["configurations"]
    assert [c["graph_rewrites"] for c in confs] == [True, False]
    assert confs[0]["sherpa_onnx"] == confs[1]["sherpa_onnx"]
    assert report["setup"]["graph_rewrites"] == [True, False]


def test_ort_profile_smoke(tmp_path):
    """bench/decode/ort_profile.py: both peers' encoder runs profiled by ONNX Runtime, the same
    number of runs, node time within run time, operators and nodes compared."""
    model = REPO / "tests" / "fixtures" / "published-layouts" / \
        "A-streaming-zipformer2-chunk-16-left-128"
    report = run_bench("decode/ort_profile.py", tmp_path / "p.json", "--streams", "2", "--seconds",
                       "4", "--runs", "1", "--search", "greedy", "--model-dir", str(model))
    ours, theirs = report["streamdec"], report["sherpa_onnx"]
    assert ours["encoder_runs"] == theirs["encoder_runs"] > 0
    for peer in (ours, theirs):
        assert 0 < peer["node_ms"] <= peer["run_ms"]
        assert peer["ops"]["Conv"] > 0
    assert report["setup"]["graph_rewrites"] is True
    assert {r["op"] for r in report["ops"]} >= {"Conv", "MatMul"}
    assert report["nodes"] and all({"node", "op", "streamdec_ms", "sherpa_onnx_ms"} <= set(r)
                                   for r in report["nodes"])
    # the rewritten convolutions are nodes of streamdec's graph only
    assert report["nodes_in_one_only"]["streamdec"] >= 32


def test_model_load_smoke(tmp_path):
    """bench/decode/model_load.py: a zipformer2 loaded with the graph rewrites and without, each in
    processes of its own: seconds, RSS and peak RSS of each."""
    model = REPO / "tests" / "fixtures" / "published-layouts" / \
        "A-streaming-zipformer2-chunk-16-left-128"
    report = run_bench("decode/model_load.py", tmp_path / "m.json", "--runs", "1", "--model-dir",
                       str(model))
    assert set(report["graph_rewrites"]) == {"on", "off"}
    for got in report["graph_rewrites"].values():
        # /proc's RSS and getrusage's peak count a few pages differently: 1 MB of slack
        assert got["seconds"] > 0 and 0 < got["rss_mb"] <= got["peak_rss_mb"] + 1
    assert report["setup"]["model"]["files"]["encoder"]["name"].startswith("encoder-")


def test_arena_bench_smoke(tmp_path):
    """bench/decode/arena.py: the three session settings give the same encoder outputs; each has
    its CPU and page faults per chunk, and its memory from a process of its own."""
    report = run_bench("decode/arena.py", tmp_path / "arena.json", "--streams", "2",
                       "--chunks", "2", "--warm", "1", "--runs", "2", "--max-batch", "3",
                       "--calls", "3")
    settings = ["arena", "malloc", "arena+patterns"]
    assert report["setup"]["settings"] == {
        "arena": {"cpu_arena": True, "memory_patterns": False},
        "malloc": {"cpu_arena": False, "memory_patterns": True},
        "arena+patterns": {"cpu_arena": True, "memory_patterns": True}}
    assert report["speed"]["outputs_equal"] is True
    assert report["speed"]["malloc"]["ratio"] == 1.0
    for name in settings:
        assert set(report["speed"][name]["cpu_seconds_per_chunk"]) == {"median", "min", "max"}
        rss = report["memory"][name]["rss_mb"]
        assert 0 < rss["loaded"] <= rss["max"]
    assert {"cpu", "cpu_flags", "cores", "onnxruntime"} <= set(report["machine"])


@pytest.mark.slow
def test_latency_smoke(tmp_path):
    report = run_bench("decode/latency.py", tmp_path / "latency.json", "--streams", "2",
                       "--seconds", "1.5", "--runs", "1", "--search", "greedy,modified_beam")
    for c in check_configurations(report, [2]):
        for peer in ("streamdec", "sherpa_onnx"):
            assert {"p50", "p95", "p99", "max", "results"} <= set(c[peer])
            assert c[peer]["results"]["median"] >= 1


@pytest.mark.slow
def test_load_smoke_both_servers(tmp_path):
    """Two real-time clients against streamdec serve and sherpa-onnx's C++ server, each
    started by the script on the built-in model; memory probe and message cost too."""
    report = run_bench("daemon/load.py", tmp_path / "load.json", "--streams", "2", "--seconds", "3",
                       "--warmup", "0", "--memory-probe", "2", "--message-cost", "20",
                       "--spread", "chunk",
                       "--b-arg=--event-loop", "--b-arg=asyncio", "--b-tree", str(REPO))
    assert report["setup"]["spread"] == "chunk"
    assert set(report["setup"]["commands"]) == {"streamdec", "sherpa_onnx", "streamdec_b"}
    assert report["setup"]["commands"]["streamdec_b"].endswith("--event-loop asyncio")
    assert report["setup"]["b_tree"] == "."  # B served from that checkout (the report's paths
    # are the repository's relative ones)
    assert "sherpa-onnx-online-websocket-server" in report["setup"]["commands"]["sherpa_onnx"]
    assert {"cpu", "cores", "sherpa_onnx", "load_average_before"} <= set(report["machine"])
    (conf,) = report["configurations"]
    assert (conf["search"], conf["streams"]) == ("greedy", 2)
    figures = {"chunk_latency_p95", "chunk_latency_p99", "token_latency_p95", "server_cpu",
               "server_rss_max"}
    assert set(conf["ratios"]) == figures and set(conf["b_ratios"]) == figures
    assert conf["ratio"] == conf["ratios"]["chunk_latency_p95"]
    for peer in ("streamdec", "sherpa_onnx", "streamdec_b"):
        figures = conf[peer]
        assert figures["unfinished"]["median"] == 0 and figures["client_errors"] == [[]]
        finals = figures["finals"]
        # every client sent at least its first utterance and got its final
        assert finals["utterances"]["median"] >= 2 and finals["received"]["median"] >= 2
        # no token came back before the message that completed its model chunk was sent
        assert figures["unmatched_tokens"]["median"] == 0
        assert figures["chunk_latency_ms"]["results"]["median"] >= 1
        assert {"p50", "p95", "p99"} <= set(figures["chunk_latency_ms"])
        assert set(figures["server_rss_mb"]) >= {"max", "growth_after_warmup_percent"}
        # the main threads' CPU is a part of the server's (each rounded to 0.1)
        main, cpu = (figures[k]["median"] for k in ("server_main_thread_cpu_percent",
                                                    "server_cpu_percent"))
        assert 0 <= main <= cpu + 0.1
        memory = report["memory"][peer]
        assert memory["connections"]["median"] == 2
        assert memory["rss_idle_mb"]["median"] > 0
        assert set(report["message_cost"][peer]) >= {"empty", "audio_10ms"}
    assert "ratio" in report["memory"]
    assert "server_latency" in conf["streamdec"]  # from its /metrics
    for peer in ("streamdec", "sherpa_onnx"):
        diagnostics = conf[peer]["diagnostics"]
        (timeline,) = diagnostics["timeline"]  # one run: [start s, results, slow, max, lag]
        assert timeline[0][0] == 0 and sum(w[1] for w in timeline) == \
            conf[peer]["chunk_latency_ms"]["results"]["median"]
        assert diagnostics["client_loop_lag"] == [[]]  # two clients never stall their loop
        assert diagnostics["steal"]["max_percent"]["median"] >= 0
    # the server's log was read: each client's connection line
    assert conf["streamdec"]["diagnostics"]["server_events"]["counts"]["connection"][
        "median"] == 2


def test_load_clients_start_over_a_message_or_evenly_over_a_model_chunk():
    """``--spread message``: 20 send times within one message, the same for clients 20
    apart (their model chunks become whole in the same message: bursts); ``--spread
    chunk``: every client a time of its own, evenly over one model chunk."""
    sys.path.insert(0, str(REPO))
    from bench.daemon.load import client_offset

    message = [client_offset("message", n, 100, 0.1, 0.32) for n in range(100)]
    assert message[:20] == pytest.approx([k * 0.005 for k in range(20)], abs=1e-12)
    assert message[20:40] == message[:20] and len(set(message)) == 20
    chunk = [client_offset("chunk", n, 100, 0.1, 0.32) for n in range(100)]
    assert chunk == pytest.approx([n * 0.0032 for n in range(100)], abs=1e-12)
    assert len(set(chunk)) == 100 and max(chunk) < 0.32


def test_call_relay_bench_smoke(tmp_path):
    out = tmp_path / "call-relay.json"
    report = run_bench("daemon/call_relay.py", out, "--messages", "200", "--runs", "2")
    assert report["setup"]["messages"] == 200 and report["setup"]["runs"] == 2
    assert set(report["us_per_message"]) == {"local", "forwarded", "unwatched"}
    assert all(v["median"] > 0 for v in report["us_per_message"].values())
    assert report["forwarded_over_local"] > 0


def test_fbank_bench_smoke(tmp_path):
    out = tmp_path / "fbank.json"
    report = run_bench("decode/fbank.py", out, "--streams", "1,2", "--seconds", "3", "--runs", "1")
    assert [c["streams"] for c in report["configurations"]] == [1, 2]
    for c in report["configurations"]:
        assert c["streamdec"]["median"] > 0
        assert set(c["kaldi_native_fbank"]) == {"compute", "compute_and_read"}
        assert c["ratio"] > 0
    # the same log-mel features up to float rounding (tests/test_fbank.py checks them bin by
    # bin): 6.2e-4 over the whole dev set (bench/results/2026-12-04-cpu-split/fbank.json)
    assert 0 <= report["max_abs_difference"] < 1e-2
    assert report["setup"]["frames"] > 0


def test_reports_name_no_path_of_this_machine():
    """A report's strings lose this machine's folders: the checkout's (relative), Python's
    (``python3``), its packages' (``site-packages``), a run's temporary folders (``<tmp>``)."""
    import sysconfig
    import tempfile

    sys.path.insert(0, str(REPO))
    from bench.common.abtest import portable

    tmp = tempfile.mkdtemp(prefix="sherpa-server-")
    try:
        got = portable({"cmd": [f"{sys.executable} -m streamdec --model {REPO}/x",
                                f"--encoder={tmp}/encoder.onnx --log-file={tmp}/log.txt",
                                sysconfig.get_paths()["purelib"] + "/sherpa_onnx/bin/server"],
                        str(REPO): 1})
    finally:
        Path(tmp).rmdir()
    assert got == {"cmd": ["python3 -m streamdec --model x",
                           "--encoder=<tmp>/encoder.onnx --log-file=<tmp>/log.txt",
                           "site-packages/sherpa_onnx/bin/server"], ".": 1}
