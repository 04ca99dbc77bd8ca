"""The package's floors (LAYERS at the repo root): no import points up the order and no modules import each other
in a circle, imports inside functions included."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "normlab"


def floors(order: str) -> dict[str, int]:
    return {name: i for i, floor in enumerate(order.split(",")) for name in floor.split("+")}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([root.name, *parts])


def imported(path: Path, root: Path):
    """(module or name imported, line) for every import of the package in `path`, at any depth of the file."""
    mod = module_name(path, root)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.split(".")[0] == root.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == root.name:
                yield from ((f"{target}.{a.name}" if a.name != "*" else target, node.lineno) for a in node.names)


def problems(root: Path, order: str) -> list[str]:
    """`upward: FILE:LINE a -> b` and `circle: m1 <-> m2` lines; [] for a package that keeps its floors."""
    floor = floors(order)
    files = sorted(root.rglob("*.py"))
    known = {module_name(p, root) for p in files}

    def resolve(target: str) -> str:
        while target and target not in known:
            target = target.rsplit(".", 1)[0] if "." in target else ""
        return target

    def top(mod: str) -> str:
        return mod.split(".")[1] if "." in mod else "__init__"

    edges: dict[str, set[str]] = defaultdict(set)
    out = []
    for path in files:
        source = module_name(path, root)
        for target, line in imported(path, root):
            target = resolve(target)
            if not target or target == source:
                continue
            edges[source].add(target)
            a, b = top(source), top(target)
            if "__init__" in (a, b) or a == b:
                continue
            assert a in floor and b in floor, f"{a if a not in floor else b} is on no floor of LAYERS: add it"
            if floor[b] > floor[a]:
                out.append(f"upward: {path.relative_to(root.parent)}:{line} {a} -> {b}")
    return list(dict.fromkeys(out)) + [f"circle: {' <-> '.join(c)}" for c in circles(edges)
                                       if not _package_reexport(c)]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def _package_reexport(component: list[str]) -> bool:
    """A package's __init__ importing its own modules (which import the package) is not a circle of design."""
    return len({m.split(".")[1] for m in component if "." in m}) == 1 and any(m.count(".") == 1 for m in component)


def test_normlab_keeps_its_floors_and_has_no_circles():
    order = (ROOT / "LAYERS").read_text("utf-8").splitlines()[0].strip()
    assert problems(PACKAGE, order) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_an_upward_import_inside_a_function_is_found(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "low.py": "def f():\n    from pkg.high import g\n",
                               "high.py": "g = 1\n"})
    assert problems(root, "low,high") == [f"upward: {Path('pkg/low.py')}:2 low -> high"]
    assert problems(root, "high,low") == []  # the same import, downward in the other order


def test_a_circle_inside_one_floor_is_found(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "a/__init__.py": "", "a/x.py": "from pkg.a import y\n",
                               "a/y.py": "def f():\n    from pkg.a.x import z\n"})
    assert problems(root, "a") == ["circle: pkg.a.x <-> pkg.a.y"]
