"""Which files of a model to load: the encoder, decoder and joiner networks and tokens.txt.

Published model directories name the networks after the checkpoint they came from and
hold several copies of each::

    encoder-epoch-99-avg-1-chunk-16-left-128.onnx       decoder-...-left-128.onnx  ...
    encoder-epoch-99-avg-1-chunk-16-left-128.int8.onnx  decoder-...-left-128.int8.onnx
    encoder-epoch-99-avg-1-chunk-16-left-64.onnx        ...
    tokens.txt

The rules, applied to the networks not given as explicit files (``ModelConfig.encoder``
etc., as sherpa-onnx's ``--encoder/--decoder/--joiner/--tokens`` take them):

- a network's candidates are the directory's ``ROLE.onnx`` and ``ROLE-*.onnx`` files
  (ROLE = encoder, decoder, joiner); what follows ROLE is the *variant*
  (``-epoch-99-avg-1-chunk-16-left-128``; empty for ``encoder.onnx``), and a name ending in
  ``.int8.onnx`` is the int8 copy of its variant;
- the variants are those every network has. With several, ``ModelConfig.variant`` picks the
  one named (``chunk-16-left-64``, or the variant's full text); without it, when each names
  ``chunk-N-left-M``, the largest left context M is taken (then the largest chunk N: the
  most context, so the best accuracy of the set); else the choice is refused as ambiguous;
- precision: fp32 files, or with ``ModelConfig.int8`` the int8 copies; a network that has
  only the other precision uses that (published archives often ship an int8 encoder with
  fp32 decoder and joiner), and the choice says so;
- tokens: ``ModelConfig.tokens``, else ``tokens.txt`` of the model directory.

Nothing is printed here: ``find_model_files`` returns what was chosen, and ``describe()``
gives the one line the command-line tools print when the directory held other copies of a
network (``ModelFiles.chose``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelLoadError
from .config import ModelConfig

__all__ = ["ModelFiles", "find_model_files", "ROLES"]

ROLES = ("encoder", "decoder", "joiner")
_NAME = re.compile(r"^(encoder|decoder|joiner)(-.*?)?(\.int8)?\.onnx$")
_CHUNK_LEFT = re.compile(r"chunk-(\d+)-left-(\d+)")


@dataclass(frozen=True)
class ModelFiles:
    """The files one model is loaded from, and how they were chosen."""

    encoder: Path
    decoder: Path
    joiner: Path
    tokens: Path
    directory: Path  # where lang/, lm.onnx, model.pt and bpe.model are looked up
    variant: str | None = None  # the variant chosen by name (None: all files explicit)
    variants: tuple[str, ...] = ()  # every variant the directory offered
    fallbacks: tuple[str, ...] = ()  # networks loaded in the other precision than asked
    chose: bool = False  # the directory held other copies of a network (a choice was made)

    def describe(self) -> str:
        """One line saying which files were chosen (the CLI prints it on stderr)."""
        names = ", ".join(p.name if p.parent == self.directory else str(p)
                          for p in (self.encoder, self.decoder, self.joiner, self.tokens))
        notes = []
        if len(self.variants) > 1:
            others = ", ".join(_label(v) for v in self.variants if v != self.variant)
            notes.append(f"variant {_label(self.variant or '')} chosen; also there: {others} "
                         "(--model-variant picks one)")
        notes += self.fallbacks
        return f"model {self.directory}: {names}" + (f" ({'; '.join(notes)})" if notes else "")


def _label(variant: str) -> str:
    return variant.lstrip("-") or "(plain names)"


def find_model_files(config: ModelConfig) -> ModelFiles:
    """The encoder, decoder, joiner and tokens files ``config`` names or its directory
    holds, chosen by the rules of this module. ModelLoadError names the directory and what
    is missing or ambiguous."""
    directory = config.path
    explicit = {r: Path(getattr(config, r)) for r in ROLES if getattr(config, r)}
    for role, path in explicit.items():
        if not path.is_file():
            raise ModelLoadError(f"{path}: {role} file not found (model.{role})")
    chosen: dict[str, Path] = dict(explicit)
    variant, variants, fallbacks, chose = None, (), (), False
    wanted = [r for r in ROLES if r not in explicit]
    if wanted:
        if not directory.is_dir():
            raise ModelLoadError(f"{directory}: model directory not found")
        variant, variants, files, fallbacks, chose = _choose(directory, wanted, config)
        chosen.update(files)
    tokens = Path(config.tokens) if config.tokens else directory / "tokens.txt"
    if not tokens.is_file():
        raise ModelLoadError(f"{tokens}: tokens file not found" +
                             ("" if config.tokens else f" in model directory {directory}"))
    return ModelFiles(chosen["encoder"], chosen["decoder"], chosen["joiner"], tokens,
                      directory, variant, variants, fallbacks, chose)


def _candidates(directory: Path) -> dict[str, dict[str, dict[bool, Path]]]:
    """role -> variant -> {is_int8: path} of the directory's network files."""
    found: dict[str, dict[str, dict[bool, Path]]] = {r: {} for r in ROLES}
    for path in sorted(directory.iterdir()):
        m = _NAME.match(path.name)
        if not m or not path.is_file():
            continue
        role, variant, int8 = m.group(1), m.group(2) or "", m.group(3) is not None
        found[role].setdefault(variant, {})[int8] = path
    return found


def _choose(directory: Path, roles: list[str], config: ModelConfig):
    found = _candidates(directory)
    for role in roles:
        if not found[role]:
            onnx = sorted(p.name for p in directory.glob("*.onnx"))
            raise ModelLoadError(
                f"{directory}: no {role} network ({role}.onnx or {role}-*.onnx); ONNX files "
                f"there: {', '.join(onnx) if onnx else 'none'}")
    common = set.intersection(*(set(found[r]) for r in roles))
    if not common:
        listing = "; ".join(f"{r}: {', '.join(_label(v) for v in sorted(found[r]))}"
                            for r in roles)
        raise ModelLoadError(f"{directory}: the encoder, decoder and joiner files share no "
                             f"variant ({listing}); name the files with model.encoder, "
                             "model.decoder, model.joiner")
    variants = tuple(sorted(common, key=_variant_order))
    variant = _pick_variant(directory, variants, config.variant)
    files, fallbacks = {}, []
    for role in roles:
        copies = found[role][variant]
        if config.int8 in copies:
            files[role] = copies[config.int8]
        else:
            files[role] = copies[not config.int8]
            fallbacks.append(f"{role}: no {'int8' if config.int8 else 'fp32'} copy, "
                             f"{'fp32' if config.int8 else 'int8'} used")
    chose = any(sum(len(c) for c in found[r].values()) > 1 for r in roles)
    return variant, variants, files, tuple(fallbacks), chose


def _variant_order(variant: str) -> tuple:
    """Sort key: the chunk/left variants by left context then chunk, the rest by name."""
    m = _CHUNK_LEFT.search(variant)
    return (1, int(m.group(2)), int(m.group(1)), variant) if m else (0, 0, 0, variant)


def _pick_variant(directory: Path, variants: tuple[str, ...], asked: str | None) -> str:
    listing = ", ".join(_label(v) for v in variants)
    if asked is not None:
        asked = asked.strip("-")
        match = [v for v in variants if v.strip("-") == asked or v.endswith("-" + asked)]
        if len(match) != 1:
            raise ModelLoadError(f"{directory}: model.variant {asked!r} matches "
                                 f"{'none' if not match else 'several'} of the variants "
                                 f"there: {listing}")
        return match[0]
    if len(variants) == 1:
        return variants[0]
    if all(_CHUNK_LEFT.search(v) for v in variants):
        return variants[-1]  # the largest left context, then the largest chunk
    raise ModelLoadError(f"{directory}: several model variants ({listing}); choose one with "
                         "model.variant (--model-variant)")
