"""The model and the peer the benchmarks compare with: sherpa-onnx (``OnlineRecognizer``, and
its C++ server in ``servers.py``) on the same model files, with the same search and ONNX
Runtime thread count.

One home for the model every benchmark runs on (``add_model_options``): ``--model-dir DIR``
(default the built-in model), ``--int8`` (the ``*.int8.onnx`` files) and ``--model-variant``
(one of several ``chunk-N-left-M`` sets), chosen by streamdec's own rules
(``streamdec.models.files``); sherpa-onnx is then given exactly the files streamdec chose
(``model_files``), never names guessed from the directory; a network streamdec repairs at
load (a ``-mobile`` zipformer2's lost padding step, ``streamdec.models.repair``) reaches
sherpa-onnx as the repaired copy ``streamdec models repair`` would write
(``sherpa_loadable``). ``model_report`` is what a
report records about them: the files and their sizes, and the provenance of a model made by
``make-sized-models`` (its ``summary.json`` one folder up: parameter counts, random
weights)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

from streamdec.models import ModelConfig
from streamdec.models.files import ModelFiles, find_model_files

__all__ = ["SHERPA_METHODS", "add_arena_option", "add_graph_rewrites_option", "add_model_options",
           "model_config", "model_files", "model_report", "serve_model_args", "sherpa_loadable",
           "sherpa_recognizer"]

#: streamdec search method -> sherpa-onnx decoding_method
SHERPA_METHODS = {"greedy": "greedy_search", "modified_beam": "modified_beam_search"}


def add_model_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--model-dir``, ``--int8``, ``--model-variant``: the model both peers load."""
    p.add_argument("--model-dir", help="model folder, e.g. a published streaming zipformer "
                   "(default: the built-in model)")
    p.add_argument("--int8", action="store_true",
                   help="the *.int8.onnx files (per network, where the folder has one), for "
                        "both peers")
    p.add_argument("--model-variant", metavar="NAME",
                   help="which of several chunk/left variants of the folder, e.g. "
                        "chunk-16-left-64 (default: the largest left context)")


def model_config(args: argparse.Namespace, threads: int = 1,
                 cpu_arena: bool = True, graph_rewrites: bool = True) -> ModelConfig:
    """The ModelConfig of ``add_model_options``' flags, with ``threads`` intra-op threads
    (and ONNX Runtime's CPU arena on or off: ``add_arena_option``; the graph rewrites on or
    off: ``add_graph_rewrites_option``)."""
    return ModelConfig(model_dir=args.model_dir, int8=args.int8, variant=args.model_variant,
                       num_threads=threads, cpu_arena=cpu_arena, graph_rewrites=graph_rewrites)


def add_arena_option(p: argparse.ArgumentParser) -> None:
    """``--cpu-arena on,off``: the settings of ``ModelConfig.cpu_arena`` a benchmark that runs
    in process measures, each against the peer (default: on, streamdec's default)."""
    p.add_argument("--cpu-arena", type=_on_off_list, default=[True], metavar="on,off",
                   help="streamdec's ONNX Runtime CPU arena (model.cpu_arena), "
                        "comma-separated: each is measured against sherpa-onnx (default on)")


def add_shared_states_option(p: argparse.ArgumentParser) -> None:
    """``--shared-states on,off``: encoder states kept as rows of the batch an encode returned
    (on: ``StateLayout.share``, streamdec's way) or split out per stream after each chunk
    (off: the way before it), each measured against the peer (default: on)."""
    p.add_argument("--shared-states", type=_on_off_list, default=[True], metavar="on,off",
                   help="encoder states as rows of the batch an encode returned (on, "
                        "streamdec's way) or split out per stream after each chunk (off, the "
                        "way before), comma-separated: each is measured against sherpa-onnx "
                        "(default on)")


def add_graph_rewrites_option(p: argparse.ArgumentParser) -> None:
    """``--graph-rewrites on,off``: streamdec's sessions opened with the graph rewritten
    (``model.graph_rewrites``: depthwise 1-D convolutions as 2-D) or from the files as they
    are, each measured against the peer (default: on, streamdec's default)."""
    p.add_argument("--graph-rewrites", type=_on_off_list, default=[True], metavar="on,off",
                   help="streamdec's graph rewrites (model.graph_rewrites), comma-separated: "
                        "each is measured against sherpa-onnx (default on)")


def _on_off_list(text: str) -> list[bool]:
    values = {"on": True, "off": False}
    out = []
    for word in text.split(","):
        if word not in values:
            raise argparse.ArgumentTypeError(f"{word!r}: on or off")
        out.append(values[word])
    return out


def model_files(args: argparse.Namespace) -> ModelFiles:
    """The encoder, decoder, joiner and tokens files the flags choose (ModelLoadError when the
    folder has none or is ambiguous)."""
    return find_model_files(model_config(args))


def serve_model_args(args: argparse.Namespace) -> list[str]:
    """The same choice as ``streamdec serve`` flags (the model folder as a user names it)."""
    out = ["--model", str(model_config(args).path)]
    if args.int8:
        out.append("--int8")
    if args.model_variant:
        out += ["--model-variant", args.model_variant]
    return out


def model_report(files: ModelFiles, int8: bool) -> dict:
    """What a report records about the model: the folder, the files chosen and their bytes,
    and, for a folder made by make-sized-models, its entry of ``../summary.json``."""
    report = {"model_dir": str(files.directory), "int8": int8, "variant": files.variant,
              "fallbacks": list(files.fallbacks),
              "files": {role: {"name": path.name, "bytes": path.stat().st_size}
                        for role, path in (("encoder", files.encoder), ("decoder", files.decoder),
                                           ("joiner", files.joiner), ("tokens", files.tokens))}}
    summary = files.directory.parent / "summary.json"
    if summary.is_file():
        entry = json.loads(summary.read_text(encoding="utf-8")).get("models", {}).get(
            files.directory.name)
        if entry is not None:
            report["provenance"] = {
                "summary": str(summary), "weights": "random (make-sized-models)",
                **{k: entry[k] for k in ("script", "num_model_parameters",
                                         "exported_parameters") if k in entry}}
    return report


def sherpa_recognizer(files: ModelFiles, model_type: str, method: str, beam: int,
                      threads: int = 1, endpoint: bool = False, provider: str = "cpu"):
    """A sherpa-onnx recognizer on ``files``; ``method`` is sherpa-onnx's name
    (``greedy_search``, ``modified_beam_search``); ``endpoint``: its default endpoint rules
    (the same three rules as streamdec's defaults); ``provider``: ``cpu``, or ``cpu:FILE``
    with FILE sherpa-onnx's session settings (``key=value`` lines, e.g. its profiler's
    ``ProfilingFilePrefix``)."""
    import sherpa_onnx

    with tempfile.TemporaryDirectory(prefix="sherpa-model-") as tmp:  # read at construction
        files = sherpa_loadable(files, Path(tmp))
        return sherpa_onnx.OnlineRecognizer.from_transducer(
            tokens=str(files.tokens), encoder=str(files.encoder), decoder=str(files.decoder),
            joiner=str(files.joiner), num_threads=threads, sample_rate=16000, feature_dim=80,
            decoding_method=method, max_active_paths=beam, model_type=model_type,
            enable_endpoint_detection=endpoint, provider=provider)


def batch_fixed_at_one(encoder: Path) -> bool:
    """Whether ``encoder``'s export fixes its batch at 1 (k2-fsa's ``-mobile`` zipformer2):
    sherpa-onnx then decodes one stream per call (its batched calls fail on such a model;
    streamdec runs it one stream at a time or through its batched rewrite)."""
    import onnx

    dims = onnx.load(str(encoder), load_external_data=False).graph.input[0].type \
        .tensor_type.shape.dim
    return bool(dims) and dims[0].HasField("dim_value") and dims[0].dim_value == 1


def sherpa_loadable(files: ModelFiles, folder: Path) -> ModelFiles:
    """``files`` with each network that needs streamdec's lost-padding repair replaced by its
    repaired copy written into ``folder`` (which must outlive their loading); the others
    unchanged."""
    import onnx

    from streamdec.models.repair import repair_lost_padding

    changed = {}
    for role in ("encoder", "decoder", "joiner"):
        path = getattr(files, role)
        model = onnx.load(str(path))
        if repair_lost_padding(model, path):
            changed[role] = folder / path.name
            onnx.save(model, str(changed[role]))
    return dataclasses.replace(files, **changed) if changed else files
