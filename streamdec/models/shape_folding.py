"""The shapes of a graph exported with a dynamic batch made constants at batch 1, for
``streamdec.models.dynamic_batch.per_stream_quantization``.

Exports with a dynamic batch (icefall's streaming encoders) compute their shapes when they
run: ``Shape`` nodes, then ``Gather``, ``Concat``, ``Div`` ... on the shape vectors, into
``Reshape`` and ``Expand`` targets and ``Slice`` bounds. The batched-graph pass follows
constant shapes at batch 1 only. ``fold_shapes`` makes them so, in a graph whose every
input has its batch pinned at 1 and no other size left open:

1. each ``Shape`` node's output, and the size of every tensor, is read from ONNX Runtime
   runs of the graph on zeros (a size does not depend on the values, only on the input
   sizes, now all fixed; a graph holding an op whose output size depends on values,
   ``NonZero`` and the like, or a subgraph, is refused); the sizes are written into the
   graph's ``value_info``, where ONNX shape inference cannot work them out;
2. every node whose inputs are all constants and whose outputs are small integer or
   boolean tensors (shape arithmetic, not weights) is evaluated by onnx's reference
   evaluator and replaced by its value.

At batch 1 the graph computes what it computed before; the pass then gives each constant
shape the batch size at run time, or refuses.
"""

from __future__ import annotations

import numpy as np

from ..errors import BatchRewriteRefused as Refused

__all__ = ["fold_shapes"]

#: ops whose output size depends on input values, and ops with subgraphs
_VALUE_SIZED = frozenset(("NonZero", "Unique", "Compress", "NonMaxSuppression", "Loop", "If",
                          "Scan", "SequenceConstruct", "SplitToSequence", "StringSplit"))
#: the most elements of a tensor taken for shape arithmetic
_SMALL = 4096
#: tensors read back per run on zeros
_PART = 2500
_NUMPY = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
          11: np.float64}


def fold_shapes(model) -> int:
    """Fold, in place, the shape computations of ``model`` (an onnx ModelProto whose inputs
    have fixed sizes) into constants (see the module docstring). Returns the number of
    nodes replaced by constants; Refused where the graph's shapes may depend on values."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    for node in graph.node:
        if node.op_type in _VALUE_SIZED:
            raise Refused(f"{node.op_type} {node.name!r}: its output size depends on values")
    shapes = [n for n in graph.node if n.op_type == "Shape"]
    if not shapes:
        return 0
    values, sizes = _run_on_zeros(model, [n.output[0] for n in shapes])
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 \
                and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    opsets = list(model.opset_import)
    kept, folded = [], []
    for node in graph.node:
        value = None
        if node.op_type == "Shape":
            value = [values[node.output[0]]]
        elif node.op_type != "Constant" and node.domain in ("", "ai.onnx") and node.input \
                and all(i in consts and consts[i].size <= _SMALL for i in node.input if i):
            value = _evaluate(node, consts, opsets, onnx, helper, numpy_helper)
        if value is None:
            kept.append(node)
            continue
        for name, v in zip(node.output, value):
            consts[name] = v
            folded.append(numpy_helper.from_array(v, name))
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(folded)
    read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    unused = [t for t in graph.initializer if t.name not in read]
    for t in unused:
        graph.initializer.remove(t)
    declared = {i.name for i in [*graph.input, *graph.output]}
    del graph.value_info[:]
    for node in graph.node:
        for name in node.output:
            if name in sizes and name not in declared:
                graph.value_info.append(helper.make_tensor_value_info(name, *sizes[name]))
    return len(folded)


def _run_on_zeros(model, names: list[str]):
    """``(values, sizes)``: the values of the tensors ``names``, and the (ONNX element type,
    shape) of every node output, from ONNX Runtime runs of ``model`` on zeros (the outputs
    asked for in parts, so that a large graph's tensors are not all held at once)."""
    import onnxruntime as ort
    from onnx import helper

    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for info in model.graph.input:
        if info.name in inits:
            continue
        tensor = info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if None in dims or tensor.elem_type not in _NUMPY:
            raise Refused(f"input {info.name!r}: a size left open or an unknown type")
        feeds[info.name] = np.zeros(dims, _NUMPY[tensor.elem_type])
    everything = list(dict.fromkeys([*names, *(o for n in model.graph.node
                                               for o in n.output if o)]))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    types = {v: k for k, v in _NUMPY.items()}
    values, sizes = {}, {}
    for start in range(0, len(everything), _PART):
        part = everything[start:start + _PART]
        probe = type(model)()
        probe.CopyFrom(model)
        del probe.graph.output[:]
        probe.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in part)
        session = ort.InferenceSession(probe.SerializeToString(), sess_options=opts,
                                       providers=["CPUExecutionProvider"])
        for name, value in zip(part, session.run(part, feeds)):
            value = np.asarray(value)
            if name in names:
                values[name] = value
            if value.dtype.type in types:
                sizes[name] = (types[value.dtype.type], list(value.shape))
    return values, sizes


def _evaluate(node, consts, opsets, onnx, helper, numpy_helper) -> list[np.ndarray] | None:
    """``node``'s outputs from its constant inputs, or None where they are not small integer
    or boolean tensors (or the reference evaluator cannot run it)."""
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph(
        [node], "fold", [], [helper.make_empty_tensor_value_info(o) for o in node.output],
        [numpy_helper.from_array(consts[i], i) for i in dict.fromkeys(node.input) if i])
    try:
        out = ReferenceEvaluator(helper.make_model(graph, opset_imports=opsets)).run(None, {})
    except Exception:  # an op or attribute the reference evaluator lacks: left as it is
        return None
    out = [np.asarray(v) for v in out]
    if not all(v.dtype.kind in "iub" and v.size <= _SMALL for v in out):
        return None
    return out
