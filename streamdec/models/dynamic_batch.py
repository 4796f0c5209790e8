"""An encoder exported with a fixed batch of 1, rewritten to take any batch, each stream's
outputs computed as the original graph computes them for that stream alone.

Some published exports (icefall's ``--dynamic-batch 0``, k2-fsa's ``-mobile`` int8
zipformer2 encoders) fix the batch in constant shapes (``Reshape`` and ``Expand`` targets);
such a model runs one stream per call. ``dynamic_batch`` rewrites the graph so that one call
runs N streams:

1. *Where the batch is.* The batch axis of every tensor is followed from the graph's inputs
   (features: axis 0; each state: its axis from ``batch_axis_from_table``) through every
   node, on the shapes ONNX shape inference gives for batch 1. A ``Reshape`` may fold the
   batch into a neighbouring axis (``[4, 1, 16, 95] -> [64, 95]``): in the row-major layout
   the batch is then an axis of stride ``S`` (the elements inside it) under ``O`` outer
   rows, which a ``Reshape`` does not change. A tensor's batch is kept as ``(k, o, s)``: at
   batch ``B`` its axis ``k`` holds ``o * B * s`` (``o = s = 1``: the axis is the batch;
   ``streamdec.models.batch_layout``). Each op has its rule (elementwise with
   broadcasting, ``DequantizeLinear`` with constant scales, ``Transpose``, ``Reshape``,
   ``Expand``, ``Concat``/``Slice``/``Gather*`` on other axes, ``MatMul``, ``Conv`` on the
   batch axis 0, reductions and ``Softmax`` on other axes, ``(Un)Squeeze``); an op without
   a rule, a reduction, slice or concatenation across the batch, or a shape that is not
   constant refuses the whole rewrite (``errors.BatchRewriteRefused``, with the node and
   the reason): the model then runs one stream at a time as before. Nothing is guessed.
2. *Shapes.* Each constant ``Reshape`` target gets its batch axis from the features' batch
   at run time (``Shape(x)[0]``, computed once); an ``Expand`` target keeps 1 there; a
   batch-free tensor that meets batched ones where its shape must match (a ``Concat``, the
   indices of a ``GatherElements``) is repeated over the batch. The graph's inputs and
   outputs get a symbolic batch dimension.
3. *Quantization per stream.* Each ``DynamicQuantizeLinear`` (one scale and zero point per
   tensor: batched as it is, a stream's codes would depend on its batch mates) and the
   ``MatMulInteger`` chains that read it are computed per stream
   (``streamdec.models.stream_quantization``).

Each row of a batch then gets exactly what the original graph gives it alone (the same
kernels on the same numbers; ONNX Runtime's float kernels compute a row the same way at any
batch size): ``tests/test_dynamic_batch.py`` checks it bit for bit on every chunk of the
real dev set through the real ``-mobile`` int8 zipformer2.
"""

from __future__ import annotations

import copy

import numpy as np

from ..errors import BatchRewriteRefused as Refused
from .batch_layout import Batch, locate
from .shape_folding import fold_shapes
from .states import batch_axis_from_table
from .stream_quantization import PerStreamQuantization

__all__ = ["dynamic_batch", "per_stream_quantization", "quantizes_across_batch"]

#: what names the rewrite's own tensors and nodes start with
_PREFIX = "streamdec_batch"

_ELEMENTWISE = frozenset((
    "Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "Max", "Min", "And", "Or", "Xor", "Not", "Mod", "Sum", "Mean",
    "Abs", "Neg", "Exp", "Log", "Sigmoid", "Tanh", "Relu", "Sqrt", "Reciprocal", "Erf",
    "Softplus", "Round", "Floor", "Ceil", "Cast", "Identity", "Clip", "Sin", "Cos",
    "LeakyRelu", "Elu", "HardSigmoid", "Sign", "IsNaN", "PRelu"))
_REDUCE = frozenset(("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                     "ReduceL2", "ReduceL1", "ReduceLogSumExp", "ReduceSumSquare"))


def _opset(model) -> int:
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            return op.version
    return 1


class _Rewrite(PerStreamQuantization):
    """One pass over a graph: the batch of every tensor and the nodes of the new graph."""

    def __init__(self, model, input_axes: dict[str, int]) -> None:
        import onnx
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.model = model
        self.graph = model.graph
        self.opset = _opset(model)
        inferred = onnx.shape_inference.infer_shapes(model)
        self.dims: dict[str, list[int]] = {}
        for info in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
            shape = info.type.tensor_type.shape
            dims = [d.dim_value if d.HasField("dim_value") else None for d in shape.dim]
            if None not in dims:
                self.dims[info.name] = dims
        self.consts = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        for node in self.graph.node:
            if node.op_type == "Constant" and len(node.attribute) == 1 \
                    and node.attribute[0].name == "value":
                self.consts[node.output[0]] = numpy_helper.to_array(
                    helper.get_attribute_value(node.attribute[0]))
        for name, value in self.consts.items():
            self.dims.setdefault(name, list(value.shape))
        self.batch: dict[str, Batch] = {n: Batch(a) for n, a in input_axes.items()}
        self.readers: dict[str, list] = {}
        for node in self.graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.taken = {v for n in self.graph.node for v in [*n.input, *n.output, n.name]}
        self.taken |= set(self.consts) | {i.name for i in self.graph.input}
        self.counts: dict[str, int] = {}  # per base name, the next suffix to try
        self.nodes: list = []
        self.new_inits: list = []
        self.skip: set[int] = set()
        self.cache: dict = {}
        self.features = self.graph.input[0].name
        self.per_stream = 0  # DynamicQuantizeLinear nodes made per stream

    # -- small builders -------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        name, n = f"{_PREFIX}/{base}", self.counts.get(base, 0)
        if n:
            name = f"{_PREFIX}/{base}_{n}"
        while name in self.taken:
            n += 1
            name = f"{_PREFIX}/{base}_{n}"
        self.counts[base] = n + 1
        self.taken.add(name)
        return name

    def const(self, value: np.ndarray, base: str = "const") -> str:
        key = ("const", value.dtype.str, value.shape, value.tobytes())
        if key not in self.cache:
            name = self.fresh(base)
            self.new_inits.append(self.numpy_helper.from_array(value, name))
            self.cache[key] = name
        return self.cache[key]

    def emit(self, op: str, inputs: list[str], base: str, out: str | None = None,
             **attrs) -> str:
        out = out or self.fresh(base)
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=self.fresh(op),
                                                **attrs))
        return out

    def batch_size(self) -> str:
        """[1] int64: the features' batch size at run time, computed once."""
        if "B" not in self.cache:
            shape = self.emit("Shape", [self.features], "shape")
            self.cache["B"] = self.emit("Slice", [shape, self.const(np.array([0])),
                                                  self.const(np.array([1]))], "batch_size")
        return self.cache["B"]

    def shape_with_batch(self, dims: list[int], b: Batch) -> str:
        """[rank] int64: ``dims`` (batch 1) with axis ``b.k`` holding ``o * B * s``."""
        key = ("shape", tuple(dims), b)
        if key not in self.cache:
            size = self.batch_size()
            if b.o * b.s != 1:
                size = self.emit("Mul", [size, self.const(np.array([b.o * b.s]))], "rows")
            parts = [self.const(np.array(dims[:b.k], np.int64))] if b.k else []
            parts.append(size)
            if b.k + 1 < len(dims):
                parts.append(self.const(np.array(dims[b.k + 1:], np.int64)))
            self.cache[key] = parts[0] if len(parts) == 1 else \
                self.emit("Concat", parts, "shape", axis=0)
        return self.cache[key]

    def repeated(self, name: str, dims: list[int], b: Batch) -> str:
        """A batch-free tensor of ``dims`` repeated over the batch at ``b``."""
        key = ("repeat", name, b)
        if key not in self.cache:
            outer, inner = b.flat(dims)
            if dims[b.k] != b.o * b.s:
                raise Refused(f"{name!r} {dims} does not fit the batch at axis {b.k}")
            three = self.emit("Reshape", [name, self.const(np.array([outer, 1, inner]))],
                              "unbatched")
            self.cache[key] = self.over_batch(three, dims, b, "repeated")
        return self.cache[key]

    def over_batch(self, rows: str, dims: list[int], b: Batch, base: str) -> str:
        """``rows``, broadcastable to ``[outer, B, inner]`` (``b.flat(dims)``), expanded to
        that at the run's batch size and reshaped to ``dims`` with the batch at ``b``."""
        outer, inner = b.flat(dims)
        target = self.emit("Concat", [self.const(np.array([outer])), self.batch_size(),
                                      self.const(np.array([inner]))], "shape", axis=0)
        wide = self.emit("Expand", [rows, target], base)
        return self.emit("Reshape", [wide, self.shape_with_batch(dims, b)], base)

    def attr(self, node, name: str, default=None):
        for a in node.attribute:
            if a.name == name:
                return self.helper.get_attribute_value(a)
        return default

    def constant(self, node, i: int) -> np.ndarray:
        if i >= len(node.input) or not node.input[i]:
            raise Refused(f"{node.op_type} {node.name!r} lacks input {i}")
        value = self.consts.get(node.input[i])
        if value is None:
            raise Refused(f"{node.op_type} {node.name!r}: input {i} is not a constant")
        return value

    def shape(self, name: str) -> list[int]:
        if name not in self.dims:
            raise Refused(f"shape of {name!r} is not fixed by shape inference")
        return self.dims[name]

    # -- the pass ---------------------------------------------------------------------------

    def run(self) -> None:
        for node in self.graph.node:
            if id(node) in self.skip:
                continue
            if node.domain not in ("", "ai.onnx"):
                raise Refused(f"{node.op_type} {node.name!r}: domain {node.domain!r}")
            batched = [name for name in node.input if name in self.batch]
            if not batched:
                self.nodes.append(node)
                continue
            rule = getattr(self, f"_{node.op_type}", None)
            if node.op_type in _ELEMENTWISE:
                rule = self._elementwise
            elif node.op_type in _REDUCE:
                rule = self._reduce
            if rule is None:
                raise Refused(f"{node.op_type} {node.name!r}: no batch rule for this op")
            rule(node)

    def keep(self, node, out: Batch) -> None:
        self.nodes.append(node)
        for name in node.output:
            if name:
                self.batch[name] = out

    def _elementwise(self, node) -> None:
        out_dims = self.shape(node.output[0])
        rank = len(out_dims)
        found: set[Batch] = set()
        for name in node.input:
            if name in self.batch:
                b, dims = self.batch[name], self.shape(name)
                shift = rank - len(dims)
                if dims[b.k] != out_dims[b.k + shift]:
                    raise Refused(f"{node.op_type} {node.name!r} broadcasts the batch axis")
                found.add(Batch(b.k + shift, b.o, b.s))
        if len(found) != 1:
            raise Refused(f"{node.op_type} {node.name!r}: inputs batched on different axes")
        out = found.pop()
        for i, name in enumerate(node.input):
            if not name or name in self.batch:
                continue
            dims = self.shape(name)
            pos = out.k - (rank - len(dims))
            if pos >= 0 and dims[pos] != 1:
                if len(dims) != rank:
                    raise Refused(f"{node.op_type} {node.name!r}: {name!r} spans the batch")
                node.input[i] = self.repeated(name, dims, out)
        self.keep(node, out)

    def _Transpose(self, node) -> None:
        b = self.batch[node.input[0]]
        perm = self.attr(node, "perm") or list(reversed(range(len(self.shape(node.input[0])))))
        self.keep(node, Batch(list(perm).index(b.k), b.o, b.s))

    def _Reshape(self, node) -> None:
        self.constant(node, 1)
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        out_dims = self.shape(node.output[0])
        out = locate(out_dims, *b.flat(dims))
        if out is None:
            raise Refused(f"Reshape {node.name!r} {dims} -> {out_dims} splits the batch")
        node.input[1] = self.shape_with_batch(out_dims, out)
        self.keep(node, out)

    def _Expand(self, node) -> None:
        if node.input[1] in self.batch:
            raise Refused(f"Expand {node.name!r}: a batched target")
        target = self.constant(node, 1).astype(np.int64).reshape(-1)
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        out_dims = self.shape(node.output[0])
        k = b.k + len(out_dims) - len(dims)
        if out_dims[k] != dims[b.k]:
            raise Refused(f"Expand {node.name!r} broadcasts the batch axis")
        pos = k - (len(out_dims) - len(target))
        if pos >= 0:
            target = target.copy()
            target[pos] = 1
            node.input[1] = self.const(target, "expand_shape")
        self.keep(node, Batch(k, b.o, b.s))

    def _Concat(self, node) -> None:
        out_dims = self.shape(node.output[0])
        axis = self.attr(node, "axis") % len(out_dims)
        found = {self.batch[n] for n in node.input if n in self.batch}
        if len(found) != 1 or next(iter(found)).k == axis:
            raise Refused(f"Concat {node.name!r} joins along the batch or across layouts")
        out = found.pop()
        for i, name in enumerate(node.input):
            if name not in self.batch:
                node.input[i] = self.repeated(name, self.shape(name), out)
        self.keep(node, out)

    def _Slice(self, node) -> None:
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        if any(n in self.batch for n in node.input[1:]):
            raise Refused(f"Slice {node.name!r}: batched bounds")
        starts, ends = self.constant(node, 1).reshape(-1), self.constant(node, 2).reshape(-1)
        axes = self.constant(node, 3).reshape(-1) if len(node.input) > 3 and node.input[3] \
            else np.arange(len(starts))
        steps = self.constant(node, 4).reshape(-1) if len(node.input) > 4 and node.input[4] \
            else np.ones(len(starts), np.int64)
        for a, s, e, st in zip(axes, starts, ends, steps):
            if a % len(dims) == b.k and not (s == 0 and e >= 2 ** 62 and st == 1):
                raise Refused(f"Slice {node.name!r} cuts the batch axis")
        self.keep(node, b)

    def _Gather(self, node) -> None:
        data, index = node.input[0], node.input[1]
        dims = self.shape(data)
        axis = self.attr(node, "axis", 0) % len(dims)
        if data in self.batch and index in self.batch:
            raise Refused(f"Gather {node.name!r}: batched data and indices")
        if index in self.batch:  # rows of a batch-free table picked per stream
            b = self.batch[index]
            self.keep(node, Batch(axis + b.k, b.o, b.s))
            return
        b = self.batch[data]
        if axis == b.k:
            raise Refused(f"Gather {node.name!r} picks along the batch")
        extra = len(self.shape(index)) - 1
        self.keep(node, Batch(b.k if b.k < axis else b.k + extra, b.o, b.s))

    def _GatherElements(self, node) -> None:
        data, index = node.input[0], node.input[1]
        if data not in self.batch:
            raise Refused(f"GatherElements {node.name!r}: batched indices of batch-free data")
        b, dims = self.batch[data], self.shape(data)
        axis = self.attr(node, "axis", 0) % len(dims)
        if axis == b.k:
            raise Refused(f"GatherElements {node.name!r} picks along the batch")
        if index in self.batch:
            if self.batch[index] != b:
                raise Refused(f"GatherElements {node.name!r}: indices batched elsewhere")
        else:
            node.input[1] = self.repeated(index, self.shape(index), b)
        self.keep(node, b)

    def _matmul_batch(self, node) -> Batch:
        """The output batch of a (batched) matrix product: the batch in the left operand's
        rows or leading axes, or in the same leading axis of both operands."""
        out_rank = len(self.shape(node.output[0]))
        found = set()
        for i, name in enumerate(node.input[:2]):
            if name not in self.batch:
                continue
            b, dims = self.batch[name], self.shape(name)
            k = b.k + out_rank - len(dims)
            if len(dims) < 2 or b.k == len(dims) - 1 - i or (i == 1 and b.k == len(dims) - 1):
                raise Refused(f"{node.op_type} {node.name!r} sums or pairs across the batch")
            found.add(Batch(k, b.o, b.s))
        if len(found) != 1:
            raise Refused(f"{node.op_type} {node.name!r}: operands batched differently")
        out = found.pop()
        both = all(n in self.batch for n in node.input[:2])
        if both and out.k >= out_rank - 2:
            raise Refused(f"{node.op_type} {node.name!r} pairs rows of different streams")
        for name in node.input[:2]:
            if name not in self.batch:
                dims = self.shape(name)
                lead = out.k - (out_rank - len(dims))
                if out.k < out_rank - 2 and lead >= 0 and dims[lead] != 1:
                    raise Refused(f"{node.op_type} {node.name!r}: a batch-free operand spans "
                                  "the batch axis")
        return out

    def _MatMul(self, node) -> None:
        self.keep(node, self._matmul_batch(node))

    def _Conv(self, node) -> None:
        b = self.batch[node.input[0]]
        if b.k != 0 or any(n in self.batch for n in node.input[1:]):
            raise Refused(f"Conv {node.name!r}: the batch is not axis 0 of its input only")
        self.keep(node, b)

    def _DequantizeLinear(self, node) -> None:
        """Constant scale and zero point (one, or one per slice of an axis other than the
        batch): elementwise."""
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        scale = self.constant(node, 1)
        if len(node.input) > 2 and node.input[2]:
            self.constant(node, 2)
        axis = self.attr(node, "axis", 1) % len(dims)
        if scale.size != 1 and (axis == b.k or b.o * b.s != 1):
            raise Refused(f"DequantizeLinear {node.name!r}: a scale per slice of the batch "
                          "axis")
        self.keep(node, b)

    def _reduce(self, node) -> None:
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        if len(node.input) > 1 and node.input[1]:
            axes = self.constant(node, 1).reshape(-1).tolist()
        else:
            axes = self.attr(node, "axes")
        if not axes:
            if self.attr(node, "noop_with_empty_axes", 0):
                self.keep(node, b)
                return
            raise Refused(f"{node.op_type} {node.name!r} reduces every axis")
        axes = [a % len(dims) for a in axes]
        if b.k in axes:
            raise Refused(f"{node.op_type} {node.name!r} reduces the batch axis")
        k = b.k if self.attr(node, "keepdims", 1) else b.k - sum(a < b.k for a in axes)
        self.keep(node, Batch(k, b.o, b.s))

    def _softmax(self, node) -> None:
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        default = -1 if self.opset >= 13 else 1
        axis = self.attr(node, "axis", default) % len(dims)
        if axis == b.k or (self.opset < 13 and axis < b.k):
            raise Refused(f"{node.op_type} {node.name!r} normalises across the batch")
        self.keep(node, b)

    _Softmax = _LogSoftmax = _softmax

    def _axes(self, node) -> list[int]:
        if len(node.input) > 1 and node.input[1]:
            return self.constant(node, 1).reshape(-1).tolist()
        return list(self.attr(node, "axes", []))

    def _Unsqueeze(self, node) -> None:
        b = self.batch[node.input[0]]
        rank = len(self.shape(node.output[0]))
        axes = sorted(a % rank for a in self._axes(node))
        kept = [i for i in range(rank) if i not in axes]
        self.keep(node, Batch(kept[b.k], b.o, b.s))

    def _Squeeze(self, node) -> None:
        b, dims = self.batch[node.input[0]], self.shape(node.input[0])
        axes = [a % len(dims) for a in self._axes(node)] or \
            [i for i, d in enumerate(dims) if d == 1]
        if b.k in axes:
            raise Refused(f"Squeeze {node.name!r} drops the batch axis")
        self.keep(node, Batch(b.k - sum(a < b.k for a in axes), b.o, b.s))

    # -- the graph's outputs ----------------------------------------------------------------

    def finish(self, output_axes: dict[str, int], symbol: str = "N") -> None:
        for output in self.graph.output:
            name = output.name
            if name not in self.batch:
                raise Refused(f"output {name!r} does not depend on the batch")
            b, dims = self.batch[name], self.shape(name)
            want = Batch(output_axes[name])
            if b != want:
                if b.flat(dims) != want.flat(dims):
                    raise Refused(f"output {name!r}: the batch ends at {b}, not at axis "
                                  f"{want.k}")
                # the same layout: a Reshape names the axis
                inner = self.fresh("output")
                for node in self.nodes:
                    for i, o in enumerate(node.output):
                        if o == name:
                            node.output[i] = inner
                    for i, o in enumerate(node.input):
                        if o == name:
                            node.input[i] = inner
                self.emit("Reshape", [inner, self.shape_with_batch(dims, want)], "output",
                          out=name)
        del self.graph.node[:]
        self.graph.node.extend(self.nodes)
        self.graph.initializer.extend(self.new_inits)
        del self.graph.value_info[:]
        for info in [*self.graph.input, *self.graph.output]:
            axis = output_axes.get(info.name, self.batch.get(info.name, Batch(0)).k)
            dim = info.type.tensor_type.shape.dim[axis]
            dim.ClearField("dim_value")
            dim.dim_param = symbol


def dynamic_batch(model) -> int:
    """Rewrite ``model`` (an onnx ModelProto: a streaming encoder whose input 0 is the
    features (1, T, F) and inputs/outputs 1..k its states, batch fixed at 1) in place to
    take any batch (see the module docstring). Returns the number of
    ``DynamicQuantizeLinear`` nodes made per stream (0: none, the rewrite still made).
    Refused (``model`` untouched) where the graph cannot be proven to batch exactly."""
    meta = {p.key: p.value for p in model.metadata_props}
    model_type = meta.get("model_type", "")
    graph = model.graph
    inputs = _inputs(model)
    if not inputs or len(inputs) != len(graph.output):
        raise Refused(f"{len(inputs)} inputs and {len(graph.output)} outputs: not an "
                      "encoder's features + states in, output + states out")
    axes = {inputs[0].name: 0}
    for inp in inputs[1:]:
        axis = batch_axis_from_table(model_type, inp.name)
        if axis is None:
            raise Refused(f"no known batch axis for state {inp.name!r} of {model_type!r}")
        axes[inp.name] = axis
    out_axes = {o.name: a for o, a in zip(graph.output, axes.values())}
    for info, axis in [*zip(inputs, axes.values()), *zip(graph.output, out_axes.values())]:
        dims = info.type.tensor_type.shape.dim
        if axis >= len(dims) or dims[axis].dim_value != 1:
            raise Refused(f"{info.name!r}: batch axis {axis} is not fixed at 1")
    return _rewritten(model, axes, out_axes, "N")


def per_stream_quantization(model) -> int:
    """Make each ``DynamicQuantizeLinear`` of ``model`` (an onnx ModelProto whose inputs and
    outputs share one symbolic batch dimension, input 0's axis 0: an encoder, decoder or
    joiner exported with a dynamic batch) per stream, in place: each row of a batch then
    gets what the graph gives it run alone (batch 1). The same pass as ``dynamic_batch``
    (its shapes worked out at batch 1; its rules refuse what they cannot place), on the
    graph as exported after its shape computations are folded into constants at batch 1
    (``streamdec.models.shape_folding``). Returns the number of nodes made per stream.
    Refused (``model`` untouched) where the graph cannot be proven to batch exactly."""
    inputs, outputs = _inputs(model), list(model.graph.output)
    dims0 = inputs[0].type.tensor_type.shape.dim if inputs else []
    symbol = dims0[0].dim_param if dims0 and not dims0[0].HasField("dim_value") else ""
    if not symbol:
        raise Refused("input 0 has no symbolic batch dimension at axis 0")
    axes: dict[str, int] = {}
    for info in [*inputs, *outputs]:
        found = [k for k, d in enumerate(info.type.tensor_type.shape.dim)
                 if d.dim_param == symbol]
        if len(found) != 1:
            raise Refused(f"{info.name!r}: {len(found)} axes of batch {symbol!r}, not 1")
        axes[info.name] = found[0]
    work = copy.deepcopy(model)
    for info in [*_inputs(work), *work.graph.output]:
        dim = info.type.tensor_type.shape.dim[axes[info.name]]
        dim.ClearField("dim_param")
        dim.dim_value = 1
    fold_shapes(work)
    out_axes = {o.name: axes[o.name] for o in outputs}
    made = _rewritten(work, {i.name: axes[i.name] for i in inputs}, out_axes, symbol)
    model.CopyFrom(work)
    return made


def quantizes_across_batch(model) -> bool:
    """True where ``model`` (an onnx ModelProto) has a dynamic batch (a symbolic axis 0 of
    its input 0) and ``DynamicQuantizeLinear`` nodes: one scale per tensor over the whole
    batch, a row's outputs depending on its batch mates (``per_stream_quantization``)."""
    inputs = _inputs(model)
    dims = inputs[0].type.tensor_type.shape.dim if inputs else []
    return bool(dims) and not dims[0].HasField("dim_value") and any(
        n.op_type == "DynamicQuantizeLinear" for n in model.graph.node)


def _inputs(model) -> list:
    """The graph's inputs that are not initializers (older exports list those too)."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def _rewritten(model, axes: dict[str, int], out_axes: dict[str, int], symbol: str) -> int:
    """``model`` rewritten in place by one ``_Rewrite`` pass from the batch ``axes`` of its
    inputs (shapes at batch 1) to ``out_axes`` of its outputs (named ``symbol`` after);
    untouched where refused. The number of ``DynamicQuantizeLinear`` made per stream."""
    work = copy.deepcopy(model)
    rewrite = _Rewrite(work, axes)
    rewrite.run()
    rewrite.finish(out_axes, symbol)
    model.CopyFrom(work)
    return rewrite.per_stream
