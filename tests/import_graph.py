"""The import graph of the toolkit's packages, read from the source (nothing is imported).

Used by tests/test_layers.py: every ``import`` and ``from ... import`` counts, at module level or inside a function
(a lazy import hides a circle from Python, not from a reader), except those under ``if TYPE_CHECKING:``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "dapo_ma", "dapo_dt", "dapo_lm")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The toolkit modules ``name`` imports (a package's ``__init__`` counts when it is named)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys
    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    for c in cycles(graph()):
        print(" <-> ".join(c))
