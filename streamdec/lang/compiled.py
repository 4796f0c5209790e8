"""A lang directory compiled once into arrays, so that the search's words load in a blink.

Reading a lang directory means spelling ~10^5 words with the model's units, parsing the
ARPA file and building the prefix tree: seconds. Its compiled form is the ``LexiconTree``
(``streamdec.search.word_graph``) and the ``NgramLm``'s arrays, in one compressed
``.npz`` file (the built-in ``lang/``: 2.3 MB, read in about 25 ms of CPU):

    tree, lm = load_compiled("lang", symbols)   # compiles on the first call, then reads
    graph = load_word_graph("lang", symbols, WordOptions(lm_scale=0.5))  # the search's

The file's name carries a key: a hash of the model's units, and one of the format version
and, for each source file (lexicon or word list, ``G.arpa``), its name, size and content
hash; a changed source or another model's units make another key. When a new file is
written beside the sources, the file for the same units and older sources is removed.
Contents are hashed rather than trusting modification times, so a copied or reinstalled
directory keeps its compiled form.

Where it is kept, the first that works: ``.streamdec-cache/`` inside the lang directory
(the built-in model ships its file there, so even a first run on a read-only install
does not compile),
then ``$STREAMDEC_HOME/lang-cache/`` (the user's cache, at most ``USER_CACHE_FILES``
files), else nowhere (the compiled form lives in memory only). Files are written under a
temporary name and renamed into place, so a reader never sees half a file; a file that
does not read back whole is compiled again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..home import streamdec_home
from .lang_dir import load_lexicon, word_sources
from .ngram import NgramLm

__all__ = ["FORMAT", "USER_CACHE_FILES", "source_key", "compile_lang", "cache_locations",
           "load_compiled", "load_word_graph"]

FORMAT = 1  # raise when the arrays or their meaning change
LOCAL_DIR = ".streamdec-cache"
USER_CACHE_FILES = 8
_PREFIX = "words-"
_TREE = ("child_ptr", "child_unit", "child_node", "word_ptr", "word_ids", "lookahead", "empty")


def source_key(files: list[Path], symbols) -> str:
    """``UNITS-SOURCES``: hex hashes of the model's units, and of the format and the source
    files' names, sizes and contents (see the module notes)."""
    units = hashlib.sha256("".join(f"{i} {symbols.id_to_symbol[i]}\n"
                                   for i in range(len(symbols))).encode())
    h = hashlib.sha256(f"streamdec-words {FORMAT}\n".encode())
    for p in files:
        data = p.read_bytes()
        h.update(f"{p.name} {len(data)} {hashlib.sha256(data).hexdigest()}\n".encode())
    return f"{units.hexdigest()[:12]}-{h.hexdigest()[:32]}"


def compile_lang(folder: Path, symbols):
    """(LexiconTree, NgramLm) read from a lang directory's source files (the slow path)."""
    from ..search.word_graph import build_tree

    _, arpa = word_sources(folder)
    lm = NgramLm.from_arpa(arpa)
    return build_tree(load_lexicon(folder, symbols), lm, symbols), lm


def cache_locations(folder: Path, key: str) -> list[Path]:
    """Where the compiled file of ``key`` may be, in the order tried."""
    return [folder / LOCAL_DIR / f"{_PREFIX}{key}.npz",
            streamdec_home() / "lang-cache" / f"{_PREFIX}{key}.npz"]


def load_compiled(folder: str | Path, symbols):
    """(LexiconTree, NgramLm) of a lang directory for the model's ``symbols``: from its
    compiled file when there is one for the current sources, else compiled now and stored
    (see the module notes)."""
    folder = Path(folder)
    try:
        key = source_key(list(word_sources(folder)), symbols)
    except OSError as e:
        raise ConfigError(f"{folder}: cannot read the lang directory ({e})") from e
    places = cache_locations(folder, key)
    for path in places:
        loaded = _read(path)
        if loaded is not None:
            return loaded
    tree, lm = compile_lang(folder, symbols)
    for path in places:
        if _write(path, tree, lm):
            break
    return tree, lm


def _arrays(tree, lm) -> dict[str, np.ndarray]:
    order, words, levels = lm.to_arrays()
    out = {name: getattr(tree, name) for name in _TREE}
    out["format"] = np.array([FORMAT, order], np.int64)
    out["lm_words"] = np.frombuffer("\n".join(words).encode(), np.uint8)
    for n, (grams, logp, backoff) in enumerate(levels, 1):
        out[f"lm_grams{n}"], out[f"lm_logp{n}"], out[f"lm_backoff{n}"] = grams, logp, backoff
    return out


def _read(path: Path):
    """(LexiconTree, NgramLm) of a compiled file; None when absent, unreadable or not of
    this format."""
    from ..search.word_graph import LexiconTree

    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            fmt, order = f["format"].tolist()
            if fmt != FORMAT:
                return None
            tree = LexiconTree(**{name: f[name] for name in _TREE})
            words = bytes(f["lm_words"]).decode().split("\n")
            levels = [(f[f"lm_grams{n}"], f[f"lm_logp{n}"], f[f"lm_backoff{n}"])
                      for n in range(1, order + 1)]
    except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile):
        return None
    n = tree.num_nodes
    if not (len(tree.word_ptr) == n + 1 and len(tree.lookahead) == n
            and tree.child_ptr[-1] == len(tree.child_unit) == len(tree.child_node)
            and tree.word_ptr[-1] == len(tree.word_ids)):
        return None
    return tree, NgramLm.from_arrays(order, words, levels)


def _write(path: Path, tree, lm) -> bool:
    """Store the compiled form at ``path`` (atomically); False when that place is not
    writable."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".npz")
        os.chmod(tmp, 0o644)  # as any other file of the directory, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **_arrays(tree, lm))
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False
    _prune(path)
    return True


def _prune(kept: Path) -> None:
    """Remove the other compiled files of ``kept``'s folder: beside a lang directory those
    for the same model units (they are of older sources), in the user's cache the oldest
    beyond USER_CACHE_FILES."""
    local = kept.parent.name == LOCAL_DIR
    units = kept.name[len(_PREFIX):].split("-")[0]
    pattern = f"{_PREFIX}{units}-*.npz" if local else f"{_PREFIX}*.npz"
    try:
        others = sorted((p for p in kept.parent.glob(pattern) if p != kept),
                        key=lambda p: p.stat().st_mtime)
        if not local:
            others = others[:max(0, len(others) + 1 - USER_CACHE_FILES)]
        for p in others:
            p.unlink(missing_ok=True)
    except OSError:  # another process pruned at the same time
        pass


def load_word_graph(folder: str | Path, symbols, options, compiled=None):
    """The ``WordGraph`` of a lang directory (lexicon x G.arpa) for the model's ``symbols``,
    from its compiled form (built on first use, then read back, see the module notes);
    ``compiled``: reads that form (default ``load_compiled``; a store passes its own to
    share one prefix tree and n-gram between option sets)."""
    from ..search.word_graph import WordGraph

    tree, lm = (compiled or load_compiled)(folder, symbols)
    return WordGraph(tree, lm, symbols, options)
