"""The comparison benchmarks take the model by one shared option (bench/common/peer.py:
``--model-dir``, ``--int8``, ``--model-variant``), chosen by streamdec's own file rules, and
give sherpa-onnx (in process and its C++ server) exactly the files streamdec chose. Tested on
a published-layout directory that holds two variants in fp32 and int8, as the 2023-06-26
English archive does."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.daemon import load  # noqa: E402
from bench.decode import beam_parity, latency, overhead, throughput  # noqa: E402
from bench.common.peer import (model_config, model_files, model_report,  # noqa: E402
                               serve_model_args)
from bench.daemon.servers import Settings, sherpa_server_args  # noqa: E402

from streamdec.cli.options import add_recognizer_options, app_config_from_args  # noqa: E402
from streamdec.models.config import BUILTIN_MODEL_DIR  # noqa: E402
from streamdec.models.files import find_model_files  # noqa: E402

LAYOUT = REPO / "tests" / "fixtures" / "published-layouts" / \
    "A-streaming-zipformer2-chunk-16-left-64-and-left-128"
PARSERS = {"throughput": throughput.parser, "overhead": overhead.parser,
           "latency": latency.parser, "load": load.parser, "beam_parity": beam_parity.parser}
# flags -> the encoder, decoder and joiner files chosen
CASES = [
    ([], "epoch-99-avg-1-chunk-16-left-128.onnx"),
    (["--int8"], "epoch-99-avg-1-chunk-16-left-128.int8.onnx"),
    (["--model-variant", "chunk-16-left-64"], "epoch-99-avg-1-chunk-16-left-64.onnx"),
    (["--int8", "--model-variant", "chunk-16-left-64"],
     "epoch-99-avg-1-chunk-16-left-64.int8.onnx"),
]


@pytest.mark.parametrize("bench", list(PARSERS))
@pytest.mark.parametrize("flags,suffix", CASES)
def test_every_benchmark_chooses_the_files_by_the_shared_option(bench, flags, suffix):
    args = PARSERS[bench]().parse_args(["--out", "r.json", "--model-dir", str(LAYOUT), *flags])
    files = model_files(args)
    assert [p.name for p in (files.encoder, files.decoder, files.joiner, files.tokens)] == [
        f"encoder-{suffix}", f"decoder-{suffix}", f"joiner-{suffix}", "tokens.txt"]
    assert files.directory == LAYOUT


@pytest.mark.parametrize("bench", list(PARSERS))
def test_without_a_model_dir_every_benchmark_runs_the_built_in_model(bench):
    files = model_files(PARSERS[bench]().parse_args(["--out", "r.json"]))
    assert (files.encoder, files.directory) == (BUILTIN_MODEL_DIR / "encoder.onnx",
                                                BUILTIN_MODEL_DIR)


@pytest.mark.parametrize("flags,suffix", CASES)
def test_both_servers_are_given_the_same_files(flags, suffix):
    """load.py starts ``streamdec serve`` with the flags a user types and the C++ server
    with the files they choose: streamdec's own command line picks those same files."""
    args = load.parser().parse_args(["--out", "r.json", "--model-dir", str(LAYOUT), *flags])
    served = serve_model_args(args)
    assert served == ["--model", str(LAYOUT), *flags]
    cli = __import__("argparse").ArgumentParser()
    add_recognizer_options(cli)
    chosen = find_model_files(app_config_from_args(cli.parse_args(served)).recognizer.model)
    files = model_files(args)
    assert chosen == files
    sherpa = sherpa_server_args(Settings(files=files, model_args=tuple(served),
                                         model_type="zipformer2"))
    assert sherpa[:4] == [f"--tokens={LAYOUT / 'tokens.txt'}",
                          f"--encoder={LAYOUT / f'encoder-{suffix}'}",
                          f"--decoder={LAYOUT / f'decoder-{suffix}'}",
                          f"--joiner={LAYOUT / f'joiner-{suffix}'}"]


def test_a_report_records_the_files_and_the_sized_models_provenance(tmp_path):
    """A folder made by make-sized-models has summary.json one level up: the report copies
    its parameter counts; any folder's report gives the chosen files and their bytes."""
    model = tmp_path / LAYOUT.name
    shutil.copytree(LAYOUT, model)
    args = throughput.parser().parse_args(["--out", "r.json", "--model-dir", str(model),
                                           "--int8"])
    assert "provenance" not in model_report(model_files(args), True)
    (tmp_path / "summary.json").write_text(json.dumps({"models": {LAYOUT.name: {
        "script": "egs/librispeech/ASR/zipformer/export-onnx-streaming.py",
        "num_model_parameters": 66110931, "exported_parameters": {"total": 65597931},
        "files": {}}}}))
    report = model_report(model_files(args), True)
    enc = model / "encoder-epoch-99-avg-1-chunk-16-left-128.int8.onnx"
    assert report["files"]["encoder"] == {"name": enc.name, "bytes": enc.stat().st_size}
    assert (report["int8"], report["variant"]) == (True, "-epoch-99-avg-1-chunk-16-left-128")
    assert report["provenance"] == {
        "summary": str(tmp_path / "summary.json"), "weights": "random (make-sized-models)",
        "script": "egs/librispeech/ASR/zipformer/export-onnx-streaming.py",
        "num_model_parameters": 66110931, "exported_parameters": {"total": 65597931}}


@pytest.mark.slow
def test_throughput_runs_both_peers_on_the_chosen_variant(tmp_path):
    """End to end on the published layout: both peers decode with the left-64 files (not the
    default left-128) and greedy search gives sherpa-onnx's tokens and frames (fp32: int8
    results may move between ONNX Runtime builds, README of the fixtures)."""
    out = tmp_path / "t.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "decode" / "throughput.py"), "--out", str(out),
                    "--model-dir", str(LAYOUT), "--model-variant", "chunk-16-left-64",
                    "--seconds", "3", "--runs", "1", "--streams", "2", "--search", "greedy",
                    "--profile", "0"], check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert report["setup"]["model"]["files"]["encoder"]["name"] == \
        "encoder-epoch-99-avg-1-chunk-16-left-64.onnx"
    [conf] = report["configurations"]
    assert conf["identical_transcripts"] == report["setup"]["utterances"] >= 1


@pytest.mark.parametrize("bench", ["throughput", "overhead"])
@pytest.mark.parametrize("flags, arenas", [
    ([], [True]),
    (["--cpu-arena", "off"], [False]),
    (["--cpu-arena", "on,off"], [True, False]),
])
def test_in_process_benchmarks_measure_each_arena_setting(bench, flags, arenas):
    """``--cpu-arena on,off`` measures streamdec with ONNX Runtime's CPU arena and without
    (model.cpu_arena), each against sherpa-onnx; the default is streamdec's own (on)."""
    args = PARSERS[bench]().parse_args(["--out", "r.json", *flags])
    assert args.cpu_arena == arenas
    configs = [model_config(args, 1, a) for a in args.cpu_arena]
    assert [c.cpu_arena for c in configs] == arenas


@pytest.mark.parametrize("bench", ["throughput", "overhead"])
def test_cpu_arena_takes_only_on_or_off(bench, capsys):
    with pytest.raises(SystemExit):
        PARSERS[bench]().parse_args(["--out", "r.json", "--cpu-arena", "on,maybe"])
    assert "'maybe': on or off" in capsys.readouterr().err
