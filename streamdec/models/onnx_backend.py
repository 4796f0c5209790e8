"""ONNX Runtime backend: loads published icefall / sherpa-onnx streaming transducers unchanged.

Inputs and outputs are bound by position (encoder input 0 = features, 1..k = states;
output 0 = encoder_out, 1..k = next states). The batch axis and the initial shape of each
state are read from the declared input shapes (the one symbolic dimension is the batch
axis); a per-family name table is used only when an export declared fixed sizes.

Three layouts need more than that:

- the streaming conformer takes one input more than it returns states: ``processed_lens``
  (N,) int64, the count of feature frames of the stream already processed (the chunks
  before this one), which the runtime fills (sherpa-onnx feeds each stream's processed
  feature frames, ``decode_chunk_len`` per chunk). It is kept as the stream's last state
  and advanced by ``decode_chunk_len`` here, so it always equals the frames processed;
- an export with a fixed batch size of 1 (icefall's ``--dynamic-batch 0``): its encoder
  runs a batch of ``BATCHED_FROM`` streams or more in one call of a second graph, rewritten
  to take any batch with each stream's outputs those of the original run on that stream
  alone (``streamdec.models.dynamic_batch``), and fewer streams one call each on the
  original; where that rewrite cannot be proven (or ``ModelConfig.graph_rewrites`` is off),
  and for a decoder or joiner with a fixed batch, a batch is split into batch-1 calls and
  the results joined.
- an int8 network with a dynamic batch (``DynamicQuantizeLinear``: one scale for the
  whole batch, a row's outputs depending on its batch mates): its quantization is made
  per stream at load (``open_network``), calls of one row going to the published graph;
  where that cannot be proven (or ``ModelConfig.graph_rewrites`` is off) its batches are
  split into calls of one row.

Metadata asking for what streamdec does not do is refused at load, naming the key: a
``model_type`` other than the families listed in ``FAMILIES``, or features other than
kaldi fbank (``feature=whisper``, a ``normalize_type``).
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import ModelLoadError
from .base import DECLARED_KEYS, feature_facts, probe_meta
from .config import ModelConfig
from .files import ModelFiles
from .graph import batched_model, rewritten_model
from .states import StateLayout, StateSpec, batch_axis_from_table
from .weights import onnx_weight_count

log = logging.getLogger("streamdec")

__all__ = ["OnnxTransducer", "EncoderContract", "read_encoder_contract", "read_context_size",
           "open_session", "open_network", "Network", "open_batched_session",
           "batch_axis_from_table", "FAMILIES"]

#: the encoder families (metadata ``model_type``) whose streaming layout streamdec runs
FAMILIES = ("zipformer2", "zipformer", "conformer", "lstm")

#: metadata keys that name the features a model was trained on, and the values that mean
#: kaldi fbank (what streamdec computes)
_FEATURE_KEYS = ("feature", "features", "feature_type", "feat_type", "frontend")
_FBANK = ("fbank", "kaldi-fbank", "kaldi_fbank", "kaldifbank")

#: the input the runtime fills with the stream's processed feature frames when the encoder
#: does not return it as a state (the streaming conformer)
_FRAME_COUNTER = "processed_lens"

#: the fewest streams an encoder with a fixed batch of 1 runs in one call of its batched
#: graph; fewer run one call each, which costs less CPU per stream. The real -mobile int8
#: zipformer2, one thread, the batched graph's encoder CPU per stream against one call each:
#: 1.77, 1.05, 0.83 and 0.80 times at 1, 2, 3 and 4 streams, 0.62-0.65 at 8 to 50
#: (bench/results/2026-12-07-real-model/batched-encoder.json; 3 streams is near even
#: across runs on a shared machine)
BATCHED_FROM = 4
#: the most streams in one call of that batched graph; a larger batch runs in calls of this
#: many. Its shapes are known only at run time, and ONNX Runtime's arena keeps each decode
#: thread's largest working set: after the server's warm-up (3 threads x 32 streams) it
#: idled at 431 MB with calls of 32 streams (one run), 240-243 MB with calls of 8, 173-176
#: MB one call per stream (bench/results/2026-12-07-real-model/idle-memory*.json), while
#: the CPU per stream is about the same from 8 streams on (``batched-encoder.json``)
BATCHED_UP_TO = 8

_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
               "tensor(float16)": np.float16, "tensor(int32)": np.int32,
               "tensor(double)": np.float64}


def open_session(path: Path, config: ModelConfig, profile: str | None = None):
    """An ONNX Runtime session on ``path`` with ``config``'s threads and memory settings;
    ``profile``: a file prefix for ONNX Runtime's own profiler (``bench/decode/ort_profile.py``)."""
    return _open(path, config, profile)[0]


@dataclass(frozen=True)
class Network:
    """One of a transducer's networks as ``open_network`` loads it."""

    session: Any  # the ONNX Runtime session a batch runs on
    #: the loaded graph still quantizes a whole batch with one scale: run a batch one row
    #: per call for each row to get what it gets alone
    rows_alone: bool = False
    #: for calls of one row, where ``session`` is the per-stream copy: the graph as
    #: published (streamdec's other rewrites made), which gives a row exactly what
    #: ``session`` gives it, in fewer nodes (None: ``session``)
    one_row: Any = None


def open_network(path: Path, config: ModelConfig, one_row: bool = False) -> Network:
    """One of a transducer's networks, its session as ``open_session`` makes it, and its
    ``DynamicQuantizeLinear`` nodes made per stream where the graph has a dynamic batch
    (``streamdec.models.dynamic_batch.per_stream_quantization``; with
    ``config.graph_rewrites``), else ``rows_alone`` (the rewrite refused, or off; logged).
    ``one_row``: where made per stream, a second session on the graph without that
    rewrite, for calls of one row (its per-stream nodes cost a row alone more than the
    published graph's; the second session takes the network's memory again)."""
    session, rows_alone, made = _open(path, config, None, per_stream=True)
    single = _open(path, config, None)[0] if made and one_row else None
    return Network(session, rows_alone, single)


def _open(path: Path, config: ModelConfig, profile: str | None, per_stream: bool = False):
    """``(session, rows_alone, made)``: see ``open_network`` (``made``: the session's graph
    is the per-stream copy)."""
    import onnxruntime as ort

    if not path.is_file():
        raise ModelLoadError(f"{path}: model file not found")
    opts = _session_options(config, profile)
    session, rows_alone = _rewritten_session(path, opts, config.graph_rewrites, per_stream)
    if rows_alone:
        say = log.warning if config.graph_rewrites else log.info
        say("%s: its DynamicQuantizeLinear nodes quantize a whole batch with one scale and "
            "are not made per stream (%s); each row of a batch runs in a call of its own",
            path, rows_alone)
    if session is not None:
        return session, bool(rows_alone), rows_alone is None
    try:
        return ort.InferenceSession(str(path), sess_options=opts,
                                    providers=["CPUExecutionProvider"]), bool(rows_alone), False
    except Exception as e:  # onnxruntime raises its own Fail/InvalidProtobuf/... types
        raise ModelLoadError(f"{path}: not a loadable ONNX model ({type(e).__name__}: "
                             f"{str(e).strip().splitlines()[0][:200]})") from e


def _session_options(config: ModelConfig, profile: str | None = None):
    """ONNX Runtime session options for ``config`` (see ``open_session``)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = config.num_threads
    opts.inter_op_num_threads = config.inter_op_threads
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    # ONNX Runtime's CPU arena (its default, and sherpa-onnx's) keeps the memory of a run's
    # tensors for the next run. Without it they come from malloc, and the blocks past glibc's
    # mmap threshold are mapped afresh and fault in page by page every run (about 43 MiB a
    # chunk for the 66 M zipformer2 at 16 streams): 6-16 % more CPU in its encoder calls
    # (the 20 M model's blocks are small enough to be reused: no difference). Memory patterns
    # (one block per input shape, sized to its peak) are off with the arena: with them an
    # arena grows with every new batch size and keeps it all (+100-110 MB, 66 M, batches of
    # 1-32 after a warm-up at 32; +3 to +10 MB without them). The arena keeps the largest
    # batch's working set: 25-90 MB more RSS than malloc between decodes, on these models
    # (bench/results/2026-12-06-sized-models-in-process). cpu_arena=False: malloc and
    # patterns, which hand a burst's memory back (bench/results/2026-12-04-memory-growth).
    opts.enable_cpu_mem_arena = config.cpu_arena
    opts.enable_mem_pattern = not config.cpu_arena
    if profile is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile
    return opts


def open_batched_session(path: Path, config: ModelConfig):
    """A session on the batched form of an encoder whose batch is fixed at 1
    (``streamdec.models.graph.batched_model``), or None where it has none (the graph cannot
    be proven to batch exactly, or ``config.graph_rewrites`` is off) or it does not load
    (logged)."""
    import onnxruntime as ort

    if not config.graph_rewrites:
        return None
    with tempfile.TemporaryDirectory(prefix="streamdec-model-") as tmp:
        batched = Path(tmp) / path.name
        try:
            if not batched_model(path, batched):
                return None
        except ModelLoadError:
            raise
        except Exception as e:  # onnx cannot read it (the plain session said why), no disk
            log.warning("%s: no batched graph (%s: %s); one stream at a time", path,
                        type(e).__name__, str(e).strip().splitlines()[0][:200] if str(e) else "")
            return None
        try:
            return ort.InferenceSession(str(batched), sess_options=_session_options(config),
                                        providers=["CPUExecutionProvider"])
        except Exception as e:
            log.warning("%s: the batched graph did not load (%s: %s); one stream at a time",
                        path, type(e).__name__, str(e).strip().splitlines()[0][:200])
            return None


def _rewritten_session(path: Path, opts, speed: bool, per_stream: bool = False):
    """``(session, rows_alone)``: a session on ``path``'s graph after
    ``streamdec.models.graph``'s rewrites (``speed``: the speed ones too; ``per_stream``:
    quantization per stream too; written to a temporary file: a session made from bytes
    keeps them), or None where none applies, or where the rewrite cannot be made or loaded
    (logged): the caller loads the file as it is, and ONNX Runtime's own error, if any, is
    the one reported. ``rows_alone``: why the graph then loaded quantizes across the batch
    ("": it does not; None: it is the per-stream copy). ModelLoadError for a lost pad step
    the repair cannot prove safe."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="streamdec-model-") as tmp:
        rewritten = Path(tmp) / path.name
        try:
            done = rewritten_model(path, rewritten, speed=speed, per_stream=per_stream)
        except ModelLoadError:
            raise
        except Exception as e:  # onnx cannot read it (ONNX Runtime says why), or no disk space
            say = log.warning if speed else log.debug
            say("%s: graph not rewritten (%s: %s); loading the file as it is", path,
                type(e).__name__, str(e).strip().splitlines()[0][:200] if str(e) else "")
            return None, ""
        alone = done.refused if done.across_batch and not done.per_stream else ""
        if not done.written:
            return None, alone
        try:
            return ort.InferenceSession(str(rewritten), sess_options=opts,
                                        providers=["CPUExecutionProvider"]), \
                None if done.per_stream else alone
        except Exception as e:
            log.warning("%s: the rewritten graph did not load (%s: %s); loading the file as "
                        "it is", path, type(e).__name__, str(e).strip().splitlines()[0][:200])
            return None, "the rewritten graph did not load" if done.across_batch else ""


def onnx_meta_weights(files: ModelFiles) -> int:
    """``ModelMeta.weights`` of a model: the weights of its three networks' ONNX files (the
    torch backend's too: its TorchScript module holds the same networks)."""
    return sum(onnx_weight_count(p) for p in (files.encoder, files.decoder, files.joiner))


def _metadata(session) -> dict[str, str]:
    return dict(session.get_modelmeta().custom_metadata_map)


def _meta_int(meta: dict[str, str], key: str, path: Path) -> int:
    if key not in meta:
        raise ModelLoadError(f"{path}: metadata lacks {key!r} (has: {sorted(meta) or 'nothing'})")
    try:
        return int(meta[key])
    except ValueError:
        raise ModelLoadError(f"{path}: metadata {key!r} is not an integer: {meta[key]!r}") from None


@dataclass(frozen=True)
class EncoderContract:
    """What an encoder file declares: family, chunking, feature dim and state layout."""

    model_type: str
    chunk_frames: int
    chunk_shift: int
    feature_dim: int
    state_layout: StateLayout
    declared: dict[str, float]  # the optional DECLARED_KEYS the metadata states
    # index in the states of the frame counter the runtime fills (conformer), or None
    frame_counter: int | None = None


def read_encoder_contract(session, path: Path) -> EncoderContract:
    """Read the chunking metadata and the state layout an encoder session declares."""
    meta = _metadata(session)
    model_type = meta.get("model_type")
    if not model_type:
        raise ModelLoadError(f"{path}: metadata lacks 'model_type'")
    if model_type not in FAMILIES:
        raise ModelLoadError(f"{path}: metadata model_type={model_type!r} is not a streaming "
                             f"transducer family streamdec runs ({', '.join(FAMILIES)})")
    _check_features(meta, path)
    inputs = session.get_inputs()
    shape = list(inputs[0].shape) if inputs else None
    if shape is None or len(shape) != 3:
        raise ModelLoadError(f"{path}: input 0 must be the features (N, T, F), got "
                             f"{'no input' if shape is None else f'shape {shape}'}")
    feature_dim = shape[-1]
    if not isinstance(feature_dim, int):
        raise ModelLoadError(f"{path}: input 0 must declare a fixed feature dim")
    n_out = len(session.get_outputs())
    counter = None
    if n_out == len(inputs) - 1 and inputs[-1].name == _FRAME_COUNTER and \
            inputs[-1].type == "tensor(int64)" and len(inputs[-1].shape) == 1:
        counter = len(inputs) - 2  # the last state
    elif n_out != len(inputs):
        raise ModelLoadError(f"{path}: {len(inputs) - 1} state inputs but "
                             f"{n_out - 1} state outputs")
    return EncoderContract(
        model_type=model_type, chunk_frames=_meta_int(meta, "T", path),
        chunk_shift=_meta_int(meta, "decode_chunk_len", path), feature_dim=feature_dim,
        state_layout=StateLayout(tuple(_state_spec(i, model_type, path) for i in inputs[1:])),
        declared=_declared(meta, path), frame_counter=counter)


def _check_features(meta: dict[str, str], path: Path) -> None:
    """ModelLoadError when the metadata says the model wants other features than fbank."""
    for key in _FEATURE_KEYS:
        if key in meta and meta[key].strip().lower() not in _FBANK:
            raise ModelLoadError(f"{path}: metadata {key}={meta[key]!r}: the model wants "
                                 "features streamdec does not compute (it computes kaldi fbank)")
    if meta.get("normalize_type", "").strip():
        raise ModelLoadError(f"{path}: metadata normalize_type={meta['normalize_type']!r}: "
                             "the model wants normalized features; streamdec computes plain "
                             "kaldi fbank")


def _fixed_batch(session, path: Path) -> bool:
    """True when the session's batch size is fixed at 1; ModelLoadError for another size."""
    inputs = session.get_inputs()
    batch = inputs[0].shape[0] if inputs and inputs[0].shape else None
    if not isinstance(batch, int):  # (a scalar input or none: the test call will tell)
        return False
    if batch != 1:
        raise ModelLoadError(f"{path}: the export fixes the batch size at {batch}; streamdec "
                             "runs a dynamic batch size or a fixed batch of 1")
    return True


def _declared(meta: dict[str, str], path: Path) -> dict[str, float]:
    out = {}
    for key in DECLARED_KEYS:
        if key in meta:
            try:
                out[key] = float(meta[key])
            except ValueError:
                raise ModelLoadError(f"{path}: metadata {key!r} is not a number: "
                                     f"{meta[key]!r}") from None
    return out


def _state_spec(inp, model_type: str, path: Path) -> StateSpec:
    shape = list(inp.shape)
    symbolic = [i for i, d in enumerate(shape) if not isinstance(d, int)]
    if len(symbolic) == 1:
        axis = symbolic[0]
    else:
        axis = batch_axis_from_table(model_type, inp.name)
        if axis is None or axis >= len(shape):
            raise ModelLoadError(f"{path}: cannot tell the batch axis of state {inp.name!r} "
                                 f"{shape} (model_type {model_type!r})")
    shape[axis] = 1
    if not all(isinstance(d, int) for d in shape):
        raise ModelLoadError(f"{path}: state {inp.name!r} has unknown size {inp.shape}")
    dtype = _ORT_DTYPES.get(inp.type)
    if dtype is None:
        raise ModelLoadError(f"{path}: state {inp.name!r} has unsupported type {inp.type}")
    return StateSpec(inp.name, np.dtype(dtype), axis, tuple(shape))


def read_context_size(session, path: Path) -> int:
    return _meta_int(_metadata(session), "context_size", path)


class OnnxTransducer:
    """A streaming transducer run by ONNX Runtime. See ``TransducerModel`` for the methods."""

    def __init__(self, config: ModelConfig, files: ModelFiles, features) -> None:
        """``files``: the chosen network and token files; ``features``: the
        ``FeatureConfig`` the model runs with (see ``feature_facts``)."""
        self.config = config
        self.files = files
        enc_path, dec_path, join_path = files.encoder, files.decoder, files.joiner
        networks = tuple(open_network(path, config, one_row=True)
                         for path in (enc_path, dec_path, join_path))
        self.encoder, self.decoder, self.joiner = (n.session for n in networks)
        #: per network: the session for calls of one row (``Network.one_row``)
        self._one_row = tuple(n.one_row for n in networks)
        contract = read_encoder_contract(self.encoder, enc_path)
        self.state_layout = contract.state_layout
        self._counter = contract.frame_counter
        self._enc_in = [i.name for i in self.encoder.get_inputs()]
        self._dec_in = self.decoder.get_inputs()[0].name
        self._join_in = [i.name for i in self.joiner.get_inputs()]
        if len(self._join_in) != 2:
            raise ModelLoadError(f"{join_path}: joiner must take 2 inputs, "
                                 f"has {len(self._join_in)}")
        fixed = tuple(_fixed_batch(s, p) for s, p in (
            (self.encoder, enc_path), (self.decoder, dec_path), (self.joiner, join_path)))
        #: per network: run a batch one row at a time (its batch size is fixed at 1, or its
        #: quantization spans the batch; see ``open_network``)
        self._one_at_a_time = tuple(f or n.rows_alone for f, n in zip(fixed, networks))
        #: the encoder rewritten to take any batch (None: none, or not fixed at 1)
        self.batched_encoder = open_batched_session(enc_path, config) if fixed[0] else None
        self._chunk_shift = contract.chunk_shift
        self.meta = probe_meta(self, model_type=contract.model_type,
                               chunk_frames=contract.chunk_frames,
                               chunk_shift=contract.chunk_shift,
                               context_size=read_context_size(self.decoder, dec_path),
                               feature_dim=contract.feature_dim, where=enc_path,
                               declared=contract.declared,
                               weights=onnx_meta_weights(files),
                               **feature_facts(files.tokens, features))
        declared_vocab = _metadata(self.decoder).get("vocab_size")
        if declared_vocab is not None and int(declared_vocab) != self.meta.vocab_size:
            raise ModelLoadError(f"{dec_path}: vocab_size {declared_vocab} != joiner output "
                                 f"{self.meta.vocab_size}")

    @property
    def batch_from(self) -> int | None:
        """The fewest streams the encoder computes in one call (fewer run one call each);
        None: every batch runs one call per stream (``Engine`` batches by it)."""
        if not self._one_at_a_time[0]:
            return 1
        return BATCHED_FROM if self.batched_encoder is not None else None

    @property
    def batch_up_to(self) -> int | None:
        """The most streams the encoder computes in one call (a larger batch runs in calls
        of this many, one after another); None: any number."""
        return BATCHED_UP_TO if self.batched_encoder is not None else None

    def encode(self, features: np.ndarray, states: Sequence[np.ndarray]
               ) -> tuple[np.ndarray, list[np.ndarray]]:
        n = features.shape[0]
        if self.batched_encoder is not None and n >= BATCHED_FROM:
            if n <= BATCHED_UP_TO:
                return self._encode(features, states, self.batched_encoder)
            specs = self.state_layout.specs
            parts = [self.encode(features[i:i + BATCHED_UP_TO], [np.ascontiguousarray(
                t[(slice(None),) * spec.batch_axis + (slice(i, i + BATCHED_UP_TO),)])
                for spec, t in zip(specs, states)]) for i in range(0, n, BATCHED_UP_TO)]
            return (np.concatenate([o for o, _ in parts]),
                    [np.concatenate([st[k] for _, st in parts], axis=spec.batch_axis)
                     for k, spec in enumerate(specs)])
        if self._one_at_a_time[0] and n > 1:
            outs = [self._encode(features[i:i + 1], one)
                    for i, one in enumerate(self.state_layout.unstack(states, n))]
            return (np.concatenate([o for o, _ in outs]),
                    self.state_layout.stack([st for _, st in outs]))
        return self._encode(features, states, self._one_row[0] if n == 1 else None)

    def _encode(self, features: np.ndarray, states: Sequence[np.ndarray], session=None
                ) -> tuple[np.ndarray, list[np.ndarray]]:
        feeds = dict(zip(self._enc_in, [features, *states]))
        out = (session or self.encoder).run(None, feeds)
        next_states = out[1:]
        if self._counter is not None:  # frames processed once this chunk is done
            next_states.insert(self._counter, states[self._counter] + self._chunk_shift)
        return out[0], next_states

    def release_arenas(self) -> None:
        """Hand back what ONNX Runtime's arenas hold beyond one silent stream's run: each
        session runs once with arena shrinkage on (``memory.enable_memory_arena_shrinkage``),
        which frees the arena's chunks no run is using. For when no decode runs (after the
        warm-up, at idle): the next burst grows the arenas again. Nothing where the arena is
        off (``ModelConfig.cpu_arena``)."""
        if not self.config.cpu_arena:
            return
        import onnxruntime as ort

        shrink = ort.RunOptions()
        shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        states = self.state_layout.initial()
        features = np.zeros((1, self.meta.chunk_frames, self.meta.feature_dim), np.float32)
        for encoder in (self.encoder, self._one_row[0]):
            if encoder is not None:
                encoder_out = encoder.run(None, dict(zip(self._enc_in, [features, *states])),
                                          shrink)[0]
        if self.batched_encoder is not None:
            rows = [features] * BATCHED_FROM
            self.batched_encoder.run(None, dict(zip(self._enc_in, [
                np.concatenate(rows), *self.state_layout.stack([states] * BATCHED_FROM)])),
                shrink)
        contexts = np.full((1, self.meta.context_size), self.meta.blank_id, np.int64)
        for decoder in (self.decoder, self._one_row[1]):
            if decoder is not None:
                decoder_out = decoder.run(None, {self._dec_in: contexts}, shrink)[0]
        for joiner in (self.joiner, self._one_row[2]):
            if joiner is not None:
                joiner.run(None, {self._join_in[0]: encoder_out[:, 0],
                                  self._join_in[1]: decoder_out}, shrink)

    def decode(self, contexts: np.ndarray) -> np.ndarray:
        if self._one_at_a_time[1] and len(contexts) > 1:
            return np.concatenate([self.decode(contexts[i:i + 1]) for i in range(len(contexts))])
        session = self._one_row[1] if len(contexts) == 1 and self._one_row[1] else self.decoder
        return session.run(None, {self._dec_in: contexts})[0]

    def join(self, encoder_out: np.ndarray, decoder_out: np.ndarray) -> np.ndarray:
        if self._one_at_a_time[2] and len(encoder_out) > 1:
            return np.concatenate([self.join(encoder_out[i:i + 1], decoder_out[i:i + 1])
                                   for i in range(len(encoder_out))])
        session = self._one_row[2] if len(encoder_out) == 1 and self._one_row[2] else \
            self.joiner
        return session.run(None, {self._join_in[0]: encoder_out,
                                  self._join_in[1]: decoder_out})[0]
