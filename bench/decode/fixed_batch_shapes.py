"""Where an encoder exported with a fixed batch of 1 keeps that batch in its constants: the
``Reshape`` and ``Expand`` nodes whose target shape is a constant, sorted by what turning
them batch-N would take.

    python bench/decode/fixed_batch_shapes.py --model-dir DIR --out fixed-batch-shapes.json

The encoder is read after streamdec's repairs at load (``streamdec.models.graph``, without
the speed rewrites), its shapes from ONNX's shape inference (all static in such an export).
Each node goes to one kind: ``one_in_both`` (the target has a 1 where the input has a 1: a
0, "copy the input's axis", would do if that 1 is the batch), ``folded`` (a -1 in the
target: the batch folded into it with other axes), ``made`` (the target has a 1 the input
has not: the batch axis made from nothing), ``no_one`` (neither a 1 nor a -1 in the
target: the batch folded into a fixed size).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import print_table, write_report  # noqa: E402
from bench.common.peer import add_model_options, model_files, model_report  # noqa: E402


def _kind(source: list | None, target: list[int]) -> str:
    if source is None:
        return "unknown_input"
    if -1 in target:
        return "folded"
    if 1 not in target:
        return "no_one"
    return "one_in_both" if 1 in source else "made"


def measure(args) -> dict:
    import onnx
    from onnx import numpy_helper

    from streamdec.models.graph import rewritten_model

    files = model_files(args)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / files.encoder.name
        if not rewritten_model(files.encoder, path, speed=False).written:
            path = files.encoder
        model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    consts[node.output[0]] = numpy_helper.to_array(a.t)
    shapes = {}
    for v in [*graph.value_info, *graph.input, *graph.output]:
        shapes[v.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param
                          for d in v.type.tensor_type.shape.dim]
    nodes = []
    for node in graph.node:
        if node.op_type in ("Reshape", "Expand") and node.input[1] in consts:
            source, target = shapes.get(node.input[0]), consts[node.input[1]].tolist()
            nodes.append({"name": node.name, "op": node.op_type, "input_shape": source,
                          "target": target, "kind": _kind(source, target)})
    counts = collections.Counter((n["op"], n["kind"]) for n in nodes)
    print_table(["op", "kind", "nodes"],
                [[op, kind, c] for (op, kind), c in sorted(counts.items())])
    return {"setup": {"benchmark": "fixed_batch_shapes",
                      "model": model_report(files, args.int8),
                      "inputs": {i.name: shapes.get(i.name) for i in graph.input[:3]}},
            "graph_nodes": len(graph.node),
            "counts": [{"op": op, "kind": kind, "nodes": c}
                       for (op, kind), c in sorted(counts.items())],
            "nodes": nodes}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="JSON report to write")
    add_model_options(p)
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    write_report(a.out, measure(a))
