"""The package's import layers: lower layers never import higher ones, and no module imports itself back.

Layers, bottom to top (a package may import its own layer and the layers below):

0. ``errors``, ``validation``, ``registry``, ``accounting``, ``deprecation``: no dependency on the rest of the package
1. ``data``, ``models`` (the DP-trained models included)
2. ``recourse``, ``metrics``
3. ``attacks``, ``results`` (the typed audit result the report renders)
4. ``defenses``, ``dp_audit``, ``report``, ``privrecourse``
5. ``audit`` (the game, its defenses registry and its typed result)
6. ``experiments`` (the grid engine, its specs and store), ``evaluation`` (quality, tradeoff), ``output_dir``
7. ``reproductions`` (one module per paper table or study, and the shipped grids)
8. ``catalog``, ``cli``, ``service`` (publish, keys, serve)

Imports under ``if TYPE_CHECKING:`` are type hints only and are not counted. The check reads
every import, at module top or inside a function, so that moving an import into a function
cannot hide a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import recourse_privacy

ROOT = Path(recourse_privacy.__file__).parent
LAYERS = [
    {
        "errors",
        "validation",
        "registry",
        "provenance",
        "hyperparams",
        "processes",
        "cache",
        "strict_json",
        "accounting",
        "deprecation",
        "global_rng",
    },
    {"data", "models"},
    {"recourse", "metrics"},
    {"attacks", "results"},
    {"defenses", "dp_audit", "report", "dpc", "privrecourse"},
    {"audit"},
    {"experiments", "evaluation", "output_dir"},
    {"reproductions"},
    {"catalog", "cli", "service"},
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[str]:
    """Every ``recourse_privacy`` module imported anywhere in ``tree``, except under ``if TYPE_CHECKING``."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recourse_privacy"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.startswith("recourse_privacy"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in ROOT.rglob("*.py"):
        graph[_module_name(path)] = set(_imports(ast.parse(path.read_text(), str(path))))
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_subpackage_has_a_layer():
    tops = {_top(m) for m in _graph()} - {""}
    assert tops <= set(LAYER_OF), f"modules outside every layer: {sorted(tops - set(LAYER_OF))}"


def test_no_module_imports_a_higher_layer():
    violations = []
    for module, imports in _graph().items():
        src = _top(module)
        if src not in LAYER_OF:
            continue  # the package's own __init__ (lazy re-exports)
        for imp in imports:
            dst = _top(imp)
            if dst and LAYER_OF.get(dst, -1) > LAYER_OF[src]:
                violations.append(f"{module} (layer {LAYER_OF[src]}) imports {imp} (layer {LAYER_OF[dst]})")
    assert not violations, "\n".join(violations)


def test_no_import_cycles_between_modules():
    graph = _graph()
    modules = set(graph)

    def resolve(name: str) -> str | None:  # "a.b.c" may name a function's module "a.b"
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = {m: {r for r in map(resolve, imps) if r and r != m} for m, imps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                cycles.append(" -> ".join(stack[stack.index(n) :] + [n]))
            elif n not in state:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            dfs(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _dotted_strings(tree: ast.AST) -> list[str]:
    """String constants that name a ``recourse_privacy`` module (registry builtins, lazy imports by name)."""
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and re.fullmatch(r"recourse_privacy(\.[a-z_0-9]+)+", n.value)
    ]


def test_no_module_names_a_higher_layer_in_a_string():
    """A registry's built-in modules are its own package's (scanned) or declared as the package's entry points."""
    violations = []
    for path in ROOT.rglob("*.py"):
        module = _module_name(path)
        src = _top(module)
        if src not in LAYER_OF:
            continue
        for name in _dotted_strings(ast.parse(path.read_text(), str(path))):
            dst = _top(name)
            if dst and LAYER_OF.get(dst, -1) > LAYER_OF[src]:
                violations.append(f"{module} (layer {LAYER_OF[src]}) names {name!r} (layer {LAYER_OF[dst]})")
    assert not violations, "\n".join(violations)


def test_builtin_entry_points_are_this_packages_modules():
    """The entry points that register higher-layer entries into lower registries load and name our own modules."""
    from importlib.metadata import entry_points

    from recourse_privacy.registry import BUILTIN_GROUP

    eps = list(entry_points(group=BUILTIN_GROUP))
    assert eps, "the package declares its cross-layer built-ins as entry points (pyproject.toml); reinstall it"
    for ep in eps:
        assert ep.value.startswith("recourse_privacy.") and _top(ep.value) in LAYER_OF, ep
