"""Every name a master notebook, a test or a benchmark imports from a ``helpers`` module is in that
module's ``__all__``: the public API is what the notebooks use, and nothing private leaks into them."""

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]


def _sources():
    for master in sorted((REPO / "solutions").glob("*/*.ipynb")):
        for i, cell in enumerate(nbformat.read(master, as_version=4).cells):
            if cell.cell_type == "code":
                yield f"{master.name} cell {i}", cell.source
    for pattern in ("tests/**/*.py", "benchmarks/*.py"):  # the tests' folders, and the benchmarks
        for path in sorted(REPO.glob(pattern)):
            yield path.name, path.read_text()


def _helpers_imports():
    """(where, module, name) for each ``from helpers... import name`` and ``module.name`` use."""
    for where, source in _sources():
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a notebook cell with IPython magic
            continue
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "helpers":
                for alias in node.names:
                    if node.module == "helpers" and alias.name in {"summarization", "core"}:
                        aliases[alias.asname or alias.name] = f"helpers.{alias.name}"
                    elif alias.name != "*":
                        yield where, node.module, alias.name
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                yield where, aliases[node.value.id], node.attr


def test_what_notebooks_and_tests_import_from_helpers_is_public():
    private, missing = [], []
    for where, module_name, name in _helpers_imports():
        module = importlib.import_module(module_name)
        if hasattr(module, "__path__") and importlib.util.find_spec(f"{module_name}.{name}"):
            continue  # a submodule of a package
        if name.startswith("_"):
            private.append(f"{where}: {module_name}.{name}")
        elif name not in getattr(module, "__all__", ()):
            missing.append(f"{where}: {module_name}.{name}")
    assert not private, f"private names used outside helpers: {private}"
    assert not missing, f"imported but not in the module's __all__: {missing}"


def test_the_summarization_package_exports_every_submodule_name():
    package = importlib.import_module("helpers.summarization")
    for sub in ("corpus", "vocabulary", "harness", "decoding", "performer"):
        module = importlib.import_module(f"helpers.summarization.{sub}")
        for name in module.__all__:
            assert getattr(package, name) is getattr(module, name), f"helpers.summarization.{name}"
            assert name in package.__all__, name


@pytest.mark.parametrize("name", ["helpers.attention_foundations", "helpers.pretraining", "helpers.kernel_attention",
                                  "helpers.core.pdf"])
def test_a_split_module_exports_every_submodule_name(name):
    """These were one module each; the package that replaced it imports every public name of its parts."""
    package = importlib.import_module(name)
    subs = [info.name for info in pkgutil.iter_modules(package.__path__)]
    assert subs
    for sub in subs:
        module = importlib.import_module(f"{name}.{sub}")
        for public in module.__all__:
            assert getattr(package, public) is getattr(module, public), f"{name}.{public}"
            assert public in package.__all__, f"{name}.{public}"


def test_a_failed_check_says_its_message_once():
    """otter shows the failing line, then the exception: for an assert with a message that is the
    message twice. It is said once; other failures keep otter's line."""
    from otter.test_files.exception_test import ExceptionTestFile

    from helpers.check_messages import say_check_messages_once

    source = '''from otter.test_files import test_case

name = "q1"

@test_case(points=0, hidden=False)
def test_scaled(f):
    assert f(4) == 2, f"f(4) should be 2 (divide by sqrt(D)); got {f(4)}"

@test_case(points=0, hidden=False)
def test_types(f):
    f("four")
'''
    assert say_check_messages_once() and say_check_messages_once()  # otter is loaded; twice is once
    checks = ExceptionTestFile.from_string(source, "q1.py")
    checks.run({"f": lambda x: x * 2 + 0})  # 8, and a TypeError on a string
    said = checks.summary()
    assert said.count("f(4) should be 2") == 1 and "got 8" in said, said
    assert "divide by sqrt(D)); got {f(4)}" not in said  # the assert's source is not shown
    assert 'f("four")' in said and "TypeError" in said, said  # another error keeps the line that raised
