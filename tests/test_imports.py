"""The import graph of roberta_static, read from the source: no cycles, and the layers of DESIGN.md.

Every import statement counts: at the top of a module, inside a function (a lazy import), under
``TYPE_CHECKING`` or in a ``try``. A lazy import breaks a cycle only at run time; the modules still
need each other, so it is an edge here too. ``from pkg import name`` goes to the submodule
``pkg.name`` when there is one, and to ``pkg`` (its ``__init__``) when ``name`` is defined there.
The parent packages that Python runs first on ``import a.b.c`` are not edges: every module would
then need ``roberta_static/__init__.py``, which says nothing about the layout.

That ``import roberta_static`` and ``StaticVectors.load`` load neither torch, transformers nor
spaCy at run time is checked in tests/test_vectors.py.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
# setup.cfg's package_dir: where each package of the installed tree lives in the checkout.
FOLDERS = {
    "roberta_static": CHECKOUT / "roberta_static",
    "roberta_static.cli": CHECKOUT / "cli",
    "roberta_static.spacy_plugin": CHECKOUT / "spacy_plugin",
}
PLUGIN_AND_CLI = ("roberta_static.cli", "roberta_static.spacy_plugin")
HEAVY = ("torch", "transformers")

# DESIGN.md: model/ is where torch and transformers are used. The other modules that import them,
# and why; each is checked both ways, so a new one fails, and so does an entry no longer needed.
TORCH_OUTSIDE_MODEL = {
    # Fine-tuning is torch training: the Trainer, its dataset and its collators (config.py, which
    # model/loading.py needs, stays a leaf without torch: see test_the_light_modules_...).
    "roberta_static.finetune.training": "Hugging Face's Trainer and its callbacks",
    "roberta_static.finetune.data": "the Trainer's IterableDataset and masking collators",
    # tune trains entry vectors, weights and a head with torch (run.py imports it lazily).
    "roberta_static.tuning.training": "tune's training: sparse embeddings, Adam, the head",
}
# `python -m roberta_static` runs the command line: the one core module that may import cli/.
MAIN = "roberta_static.__main__"


@dataclass(frozen=True)
class Graph:
    """Our modules, the edges between them and the outside packages each one imports."""

    modules: dict[str, Path]
    edges: dict[str, dict[str, int]]  # importer -> imported -> line of the first such import
    outside: dict[str, dict[str, int]]  # importer -> top-level outside package -> line


def _module_names() -> dict[str, Path]:
    modules = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of the dotted ``name`` that is one of our modules, if any."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _imported(
    node: ast.Import | ast.ImportFrom, module: str, modules: dict[str, Path]
) -> list[str]:
    """The absolute names one import statement imports (ours or not), one per imported name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    # `from pkg import name`: the submodule pkg.name where there is one, else pkg's __init__.
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in node.names
    ]


@cache
def import_graph() -> Graph:
    """Read every module's imports into a `Graph`."""
    modules = _module_names()
    edges: dict[str, dict[str, int]] = {}
    outside: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges[module], outside[module] = {}, {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(node, module, modules):
                ours = _known(name, modules)
                if ours is not None and ours != module:
                    edges[module].setdefault(ours, node.lineno)
                elif ours is None:
                    outside[module].setdefault(name.split(".")[0], node.lineno)
    return Graph(modules, edges, outside)


def _cycle_through(start: str, edges: dict[str, dict[str, int]]) -> list[str]:
    """A shortest cycle from ``start`` back to it (``[]`` when there is none)."""
    came_from: dict[str, str] = {}  # each module reached, and the module it was reached from
    frontier = [start]
    while frontier and start not in came_from:
        following = []
        for module in frontier:
            for target in sorted(edges[module].keys() - came_from.keys()):
                came_from[target] = module
                following.append(target)
        frontier = following
    if start not in came_from:
        return []
    path = [start, came_from[start]]
    while path[-1] != start:
        path.append(came_from[path[-1]])
    return path[::-1]


def _describe(cycle: list[str], graph: Graph) -> str:
    steps = " → ".join(cycle)
    lines = ", ".join(
        f"{graph.modules[a].relative_to(CHECKOUT)}:{graph.edges[a][b]}"
        for a, b in zip(cycle, cycle[1:], strict=False)
    )
    return f"{steps}  ({lines})"


def cycles(graph: Graph) -> list[list[str]]:
    """A shortest cycle through each module that is on one, each cycle once."""
    found = set()
    for module in graph.edges:
        cycle = _cycle_through(module, graph.edges)[:-1]
        if cycle:
            first = cycle.index(min(cycle))  # the same cycle found from another module: same tuple
            found.add((*cycle[first:], *cycle[:first], cycle[first]))
    return sorted(map(list, found))


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _core(graph: Graph) -> list[str]:
    return [m for m in graph.modules if not _in(m, *PLUGIN_AND_CLI) and m != MAIN]


def test_the_graph_is_read_whole():
    # The checks below mean something only if the reader finds the imports it should.
    graph = import_graph()
    assert "roberta_static.spacy_plugin.factories" in graph.modules
    assert "roberta_static.cli.distill" in graph.modules
    assert "roberta_static.api" in graph.edges["roberta_static"]  # lazy, in __getattr__
    assert "torch" in graph.outside["roberta_static.model.encoder"]


def test_a_cycle_is_found_and_printed_with_its_lines():
    edges = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 7, "d": 1}, "d": {}}
    graph = Graph({m: CHECKOUT / f"{m}.py" for m in edges}, edges, {m: {} for m in edges})
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert _describe(["a", "b", "c", "a"], graph) == "a → b → c → a  (a.py:3, b.py:5, c.py:7)"


def test_no_import_cycles_lazy_imports_included():
    graph = import_graph()
    found = [_describe(cycle, graph) for cycle in cycles(graph)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_core_never_imports_the_spacy_plugin_or_the_cli():
    graph = import_graph()
    wrong = [
        f"{graph.modules[m].relative_to(CHECKOUT)}:{line} imports {target}"
        for m in _core(graph)
        for target, line in graph.edges[m].items()
        if _in(target, *PLUGIN_AND_CLI)
    ]
    assert not wrong, "\n".join(wrong)


def test_only_model_imports_torch_or_transformers_and_the_exceptions_are_named():
    graph = import_graph()
    users = {m for m in graph.modules if any(p in graph.outside[m] for p in HEAVY)}
    outside_model = {m for m in users if not _in(m, "roberta_static.model")}
    assert outside_model == set(TORCH_OUTSIDE_MODEL), (
        "torch or transformers outside model/: "
        f"new {sorted(outside_model - set(TORCH_OUTSIDE_MODEL))}, "
        f"no longer {sorted(set(TORCH_OUTSIDE_MODEL) - outside_model)} (update the list)"
    )


@pytest.mark.parametrize(
    "light", ["roberta_static.text", "roberta_static.vectors", "roberta_static.finetune.config"]
)
def test_the_light_modules_reach_no_torch_or_transformers(light):
    # Through our own modules too: a vectors/ module that imports model/ would load torch.
    graph = import_graph()
    wrong = []
    for start in (m for m in graph.modules if _in(m, light)):
        seen, todo = {start}, [start]
        while todo:
            module = todo.pop()
            if any(p in graph.outside[module] for p in HEAVY):
                wrong.append(f"{start} reaches torch or transformers through {module}")
            following = set(graph.edges[module]) - seen
            seen |= following
            todo += following
    assert not wrong, "\n".join(sorted(wrong))


def test_model_needs_only_the_finetune_config():
    graph = import_graph()
    needed = {
        target
        for module in graph.modules
        if _in(module, "roberta_static.model")
        for target in graph.edges[module]
        if _in(target, "roberta_static.finetune")
    }
    assert needed <= {"roberta_static.finetune.config"}
