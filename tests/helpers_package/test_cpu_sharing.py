"""Notebooks share the CPU with a student's other programs: torch's idle threads sleep, set up
before torch loads, whatever started the kernel (helpers.cpu)."""

import ast
import os

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.layout import Layout
from helpers.cpu import WAIT_POLICY, WAIT_POLICY_ENV

LAYOUT = Layout.find()
SLUGS = LAYOUT.slugs()

#: Modules that load torch, and with it its OpenMP runtime, when imported.
LOADS_TORCH = {"torch", "transformers", "torch_geometric", "bertviz", "accelerate"}


@pytest.mark.parametrize("slug", SLUGS)
def test_every_notebook_imports_helpers_before_anything_that_loads_torch(slug):
    nb = nbformat.read(LAYOUT.student_dir(slug) / f"{slug}.ipynb", as_version=4)
    for cell in (cell for cell in nb.cells if cell.cell_type == "code"):
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                name = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name).split(".")[0]
                if name == "helpers":
                    return
                assert name not in LOADS_TORCH, f"{slug}: {name} imported before helpers; torch's threads would spin-wait"
    pytest.fail(f"{slug}: no cell imports helpers")


def _run_in_fresh_kernel(source: str, tmp_path) -> list[str]:
    """The text outputs of one cell run in a new kernel started without a wait policy, as a
    student's JupyterLab would start it."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    saved = os.environ.pop(WAIT_POLICY_ENV, None)
    try:
        NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if saved is not None:
            os.environ[WAIT_POLICY_ENV] = saved
    return [out.get("text", "") for out in nb.cells[0].outputs if out.output_type == "stream"]


PROBE = ("import helpers, os, torch\n"
         f"print(helpers.threading_policy(), os.environ.get({WAIT_POLICY_ENV!r}), torch.get_num_threads())\n")


def test_a_real_kernel_running_a_first_cell_gets_sleeping_threads_on_every_core(tmp_path):
    nb = nbformat.read(LAYOUT.student_dir("kernel_attention") / "kernel_attention.ipynb", as_version=4)
    first = next(cell.source for cell in nb.cells if cell.cell_type == "code" and "import helpers" in cell.source)
    printed = "".join(_run_in_fresh_kernel(first + "\n" + PROBE, tmp_path)).split()
    threads = int(printed[-1])
    assert printed[-3:-1] == ["passive", WAIT_POLICY]
    assert threads == len(os.sched_getaffinity(0))  # every core stays in use when the machine is idle


def test_torch_loaded_before_helpers_falls_back_to_one_thread_and_says_why(tmp_path):
    printed = "".join(_run_in_fresh_kernel("import torch\n" + PROBE, tmp_path))
    assert "imported before helpers" in printed and "Import helpers first" in printed
    assert printed.split()[-3:] == ["thread", "None", "1"]  # "one thread", no policy, 1 thread


def test_a_policy_the_user_chose_is_kept(tmp_path):
    printed = "".join(_run_in_fresh_kernel(
        f"import os\nos.environ[{WAIT_POLICY_ENV!r}] = 'ACTIVE'\n" + PROBE, tmp_path))
    assert printed.split()[-2] == "ACTIVE"
    assert "as set by the environment" in printed


def test_a_script_that_loaded_torch_first_keeps_its_threads():
    import subprocess
    import sys

    code = "import torch; torch.set_num_threads(2); import helpers; print(helpers.threading_policy(), torch.get_num_threads())"
    env = {key: value for key, value in os.environ.items() if key != WAIT_POLICY_ENV}
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert printed.split() == ["as", "torch", "set", "it", "2"]
