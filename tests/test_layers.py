"""The layers of the package hold in its imports: read every ``import`` of streamdec/**/*.py
(module level, ``if TYPE_CHECKING:`` blocks and imports inside functions alike) and fail on
an arrow from a layer up to a higher one, and on any import cycle between modules.

Layers, from the bottom (a module may import its own layer and the ones below it):

==================  ==========================================================================
layer               modules
==================  ==========================================================================
core                errors, validation, home, lru, buffers, tokens, audio/, models/, search/,
                    lang/, core/, textfmt/, the package root (``streamdec/__init__``): samples
                    in, events (and text for people) out, no sockets, threads or asyncio
engine              engine: asyncio batching and worker threads over the core
model store         hub/: the catalog of published models, downloads, the local cache
adapter configs     server/config, rayserve/config: the frozen ``[server]`` and ``[ray]`` tables;
                    server/endpointing: the bounds of a connection's endpoint rules
records             records/: the transcript store (SQLite, PostgreSQL) the server writes
                    finals into and reads transcripts back from
app config          appconfig: ``AppConfig``, ``AudioConfig``, ``load_config`` (TOML files)
adapters            allocator, files/, microphone, server/, web/: bytes <-> core
process             rayserve/: the daemon's app on Ray Serve replicas
command line        cli/, ``__main__``
==================  ==========================================================================

A package's ``__init__`` belongs to the layer of its package; the longest prefix in the
table names a module's layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "streamdec"

LAYERS = (
    ("core", ("streamdec", "streamdec.errors", "streamdec.validation", "streamdec.home",
              "streamdec.lru", "streamdec.buffers", "streamdec.tokens", "streamdec.audio",
              "streamdec.models", "streamdec.search", "streamdec.lang", "streamdec.core",
              "streamdec.textfmt")),
    ("engine", ("streamdec.engine",)),
    ("model store", ("streamdec.hub",)),
    ("adapter configs", ("streamdec.server.config", "streamdec.server.endpointing",
                         "streamdec.rayserve.config")),
    ("records", ("streamdec.records",)),
    ("app config", ("streamdec.appconfig",)),
    ("adapters", ("streamdec.allocator", "streamdec.files", "streamdec.microphone",
                  "streamdec.server", "streamdec.web")),
    ("process", ("streamdec.rayserve",)),
    ("command line", ("streamdec.cli", "streamdec.__main__")),
)
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str:
    best, best_len = None, -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = name, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and docs/design.md)")
    return best


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = importer.split(".")
    if not MODULES[importer].name == "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> list[tuple[str, bool]]:
    """(imported streamdec module, at module level) for every import in ``module``; an
    ``if TYPE_CHECKING:`` block counts as module level."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, child)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append((sub if sub in MODULES else base, top))
            visit(child, inner)

    visit(tree, True)
    return [(name, top) for name, top in found if name in MODULES or name == "streamdec"
            or name.startswith("streamdec.")]


GRAPH = {module: imports(module) for module in MODULES}


def test_every_import_of_the_package_names_one_of_its_modules():
    """(An import of a module that was moved away is caught here, even inside a function.)"""
    assert sorted(f"{m} imports {t}" for m, targets in GRAPH.items() for t, _ in targets
                  if t not in MODULES) == []


def test_every_module_has_a_layer():
    """Named in the table by itself or its package (the package root's entry names only
    ``streamdec/__init__``: a new module must be placed, not fall into the core)."""
    assert sorted(m for m in MODULES if m != "streamdec" and not any(
        m == p or m.startswith(p + ".") for _, ps in LAYERS for p in ps if p != "streamdec")) \
        == []


def test_no_arrow_up_a_layer():
    upward = [f"{m} ({layer_of(m)}) imports {target} ({layer_of(target)})"
              for m, targets in GRAPH.items() for target, _ in targets
              if target in MODULES and RANK[layer_of(target)] > RANK[layer_of(m)]]
    assert upward == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (or a
    module importing itself): Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges[v]:
                components.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return components


@pytest.mark.parametrize("scope", ["module level", "all imports"])
def test_no_import_cycle(scope):
    edges = {m: {t for t, top in targets if (top or scope == "all imports") and t != m
                 and t in MODULES} for m, targets in GRAPH.items()}
    # a package imports its own submodules in __init__; a submodule's import of a sibling
    # runs that __init__ first, which is not an arrow back
    for m in edges:
        edges[m] = {t for t in edges[m] if not (MODULES[t].name == "__init__.py"
                                                and m.startswith(t + "."))}
    assert _cycles(edges) == []


def test_the_checks_catch_what_they_look_for():
    """The graph reader sees the two kinds of arrow it checks (so the tests above cannot pass
    because nothing was read)."""
    assert ("streamdec.errors", True) in GRAPH["streamdec.audio.features"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert RANK[layer_of("streamdec.server.sherpa")] > RANK[layer_of("streamdec.core.recognizer")]
    assert layer_of("streamdec.audio.pcm") == layer_of("streamdec.core.stream") == "core"
    assert layer_of("streamdec.server.config") == "adapter configs"


BELOW_THE_ENGINE = ("streamdec.audio", "streamdec.models", "streamdec.search", "streamdec.lang",
                    "streamdec.core")
ABOVE_THE_CORE = ("streamdec.engine", "streamdec.server", "streamdec.cli")


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_core_packages_import_no_engine_server_or_command_line():
    """audio/, models/, search/, lang/ and core/ are the recognizer without I/O: no module in
    them imports the engine, the server or the CLI, at module level or inside a function."""
    packages = {p for p in BELOW_THE_ENGINE if p in MODULES}
    assert packages == set(BELOW_THE_ENGINE)  # each package is there to be checked
    assert sorted(f"{m} imports {t}" for m, targets in GRAPH.items() if _within(m, packages)
                  for t, _ in targets if _within(t, ABOVE_THE_CORE)) == []
