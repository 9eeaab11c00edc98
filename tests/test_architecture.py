"""The layout's rules, checked on the import graph (static: every import statement, also those
inside functions): packages import only downwards, ``models/`` imports only the input types and
the errors, and no module imports another module's private name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the layers, bottom first: a package may import its own layer and the ones below it
LAYERS = ["belief.core", "belief.inputs", "models", "belief.posterior", "belief.decision",
          "belief.workflow", "belief.campaign", "belief.report", "belief.cli", "belief.lab"]
CORE = {"belief.errors", "belief.files", "belief.validate"}


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("belief", "models"):
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(p for p in parts if p != "__init__")
            out[name] = path
    return out


def _package(module: str) -> str | None:
    if module in CORE:
        return "belief.core"
    if module.startswith("models"):
        return "models"
    parts = module.split(".")
    if parts[0] == "belief" and len(parts) >= 2 and f"belief.{parts[1]}" in LAYERS:
        return f"belief.{parts[1]}"
    return None  # belief/__init__ (the lazy public API) and belief.__main__-style entries


def _imports(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names, line) of every import of belief/models code in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("belief", "models"):
                    found.append((alias.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in ("belief", "models"):
                found.append((node.module, [a.name for a in node.names], node.lineno))
    return found


GRAPH = {name: _imports(path, name) for name, path in _modules().items()}


def _target(imported: str, names: list[str]) -> list[str]:
    """The modules an import statement reaches (``from belief.cli import main`` → the module
    ``belief.cli.main`` when that is a module, else the package)."""
    modules = _modules()
    out = []
    for n in names or [""]:
        full = f"{imported}.{n}" if n else imported
        out.append(full if full in modules else imported)
    return out


def test_packages_import_only_downwards():
    rank = {p: i for i, p in enumerate(LAYERS)}
    bad = []
    for module, imports in GRAPH.items():
        src = _package(module)
        if src is None:
            continue
        for imported, names, line in imports:
            for target in _target(imported, names):
                dst = _package(target)
                if dst is not None and rank[dst] > rank[src]:
                    bad.append(f"{module}:{line} imports {target} ({src} → {dst})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_cycle_between_packages():
    edges: dict[str, set[str]] = {p: set() for p in LAYERS}
    for module, imports in GRAPH.items():
        src = _package(module)
        for imported, names, _ in imports:
            for target in _target(imported, names):
                dst = _package(target)
                if src and dst and dst != src:
                    edges[src].add(dst)
    seen, stack = set(), []

    def visit(p: str) -> None:
        if p in stack:
            raise AssertionError("package cycle: " + " → ".join([*stack[stack.index(p):], p]))
        if p in seen:
            return
        stack.append(p)
        for q in sorted(edges[p]):
            visit(q)
        stack.pop()
        seen.add(p)

    for p in LAYERS:
        visit(p)


def test_no_two_modules_import_each_other():
    """A pair of modules that import each other (at any depth of the file, functions too) is a
    third module missing: what both need belongs below both."""
    edges = {m: {t for imp, names, _ in imports for t in _target(imp, names) if t != m}
             for m, imports in GRAPH.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, targets in edges.items() for b in targets
                    if a in edges.get(b, ())})
    assert not pairs, "modules importing each other: " + ", ".join(" ↔ ".join(p) for p in pairs)


def test_product_packages_never_import_the_laboratory():
    """belief.lab (the clairvoyant, the small problems, calibration) measures the engine; the
    product (models, belief/__init__ and every package but the lab) never imports it."""
    assert any(m.startswith("belief.lab.") for m in GRAPH)  # the rule has something to guard
    bad = [f"{m}:{line} imports {imp}" for m, imports in GRAPH.items()
           if not (m == "belief.lab" or m.startswith("belief.lab."))
           for imp, _, line in imports if imp == "belief.lab" or imp.startswith("belief.lab.")]
    assert not bad, "product modules importing the laboratory:\n" + "\n".join(bad)


def test_models_import_only_input_types_and_errors():
    allowed = ("belief.inputs", "belief.errors", "models")
    bad = [f"{m}:{line} imports {imp}" for m, imports in GRAPH.items() if m.startswith("models")
           for imp, _, line in imports if not imp.startswith(allowed)]
    assert not bad, "\n".join(bad)


def test_no_module_imports_another_modules_private_name():
    bad = [f"{m}:{line} imports {imp}.{n}" for m, imports in GRAPH.items()
           for imp, names, line in imports for n in names
           if n.startswith("_") and not n.startswith("__")]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["belief/inputs", "belief/posterior", "belief/decision",
                                     "belief/decision/cvu", "belief/workflow", "belief/campaign",
                                     "belief/report", "belief/cli", "belief/lab"])
def test_every_package_module_declares_its_public_names(package):
    missing = [p.name for p in (ROOT / package).glob("*.py")
               if p.name not in ("__init__.py", "__main__.py")
               and "__all__" not in p.read_text(encoding="utf-8")]
    assert not missing, f"{package}: modules without __all__: {missing}"
