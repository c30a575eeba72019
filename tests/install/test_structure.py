"""The shape of the code: the helpers students install never import the grader, and no module of
either package imports, at any depth and from anywhere in its body, a module that imports it back."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("helpers", "autograder")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the two packages that ``name`` imports: every import statement, including those
    inside functions, and every ``import_module("...")`` of a literal name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # ``from package import module``
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_the_helpers_never_import_the_grader():
    wrong = {name: sorted(m for m in targets if m.split(".")[0] == "autograder")
             for name, targets in graph().items() if name.split(".")[0] == "helpers"}
    wrong = {name: targets for name, targets in wrong.items() if targets}
    assert wrong == {}, f"helpers modules that import autograder: {wrong}"
    # nor by a name assembled at run time: no helpers module spells the grader's package in an import
    for path in (REPO / "helpers").rglob("*.py"):
        assert "import_module(\"autograder" not in path.read_text(encoding="utf-8"), path


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle():
    assert cycles(graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_folder_of_tests_is_collected(pytestconfig):
    """pytest skips folders its ``norecursedirs`` names (by default any ``build``): none of the
    tests' folders may be one, or its tests would silently never run."""
    from fnmatch import fnmatch

    skipped = pytestconfig.getini("norecursedirs")
    folders = [p for p in (REPO / "tests").rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert [p for p in folders if any(fnmatch(p.name, pattern) for pattern in skipped)] == []
    assert any(p.name == "build" for p in folders)  # the folder pytest's default would skip is there
