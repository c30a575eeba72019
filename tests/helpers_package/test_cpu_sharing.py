"""Notebooks share the CPU with a student's other programs: in a notebook's kernel torch keeps its
default waiting and takes one thread fewer per other busy program, whatever started the kernel and
whatever order the imports ran in; elsewhere the environment's or passive waiting (helpers.cpu)."""

import ast
import os

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.layout import Layout
from helpers.cpu import WAIT_POLICY_ENV, threads_for

LAYOUT = Layout.find()
# a busy neighbour's share is what these tests measure: nothing in the background (conftest)
pytestmark = pytest.mark.alone


def _run_in_fresh_kernel(source: str | list[str], tmp_path) -> list[str]:
    """The text outputs of the last of these cells, run in a new kernel started without a wait
    policy, as a student's JupyterLab would start it."""
    sources = [source] if isinstance(source, str) else source
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in sources])
    saved = os.environ.pop(WAIT_POLICY_ENV, None)
    try:
        NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if saved is not None:
            os.environ[WAIT_POLICY_ENV] = saved
    return [out.get("text", "") for out in nb.cells[-1].outputs if out.output_type == "stream"]


PROBE = ("import helpers, os, torch\n"
         f"print(helpers.threading_policy(), os.environ.get({WAIT_POLICY_ENV!r}), torch.get_num_threads())\n")


def test_a_real_kernel_running_a_first_cell_keeps_torch_s_waiting_and_every_core(tmp_path):
    nb = nbformat.read(LAYOUT.student_dir("kernel_attention") / "kernel_attention.ipynb", as_version=4)
    first = next(cell.source for cell in nb.cells if cell.cell_type == "code" and "import helpers" in cell.source)
    printed = "".join(_run_in_fresh_kernel(first + "\n" + PROBE, tmp_path)).split()
    assert printed[-3:-1] == ["adaptive", "None"]  # no wait policy set: torch's default, fastest when idle
    assert int(printed[-1]) == len(os.sched_getaffinity(0))  # every core in use when the machine is idle


def test_torch_loaded_before_helpers_in_a_kernel_is_followed_all_the_same(tmp_path):
    printed = "".join(_run_in_fresh_kernel("import torch\n" + PROBE, tmp_path))
    assert printed.split()[-3:] == ["adaptive", "None", str(len(os.sched_getaffinity(0)))]


#: A cell that runs torch through ``helpers.progress`` for up to 60 s: it prints the thread count
#: at each step once a busy program runs beside it, stops when the count has dropped and stayed down
#: for a second, then stops the neighbour and runs until the count is back up.
FOLLOWS_THE_LOAD = """
import subprocess, sys, time
import helpers, torch
model, x = torch.nn.Linear(256, 256), torch.randn(2048, 256)
neighbour = subprocess.Popen([sys.executable, "-c", "import time\\ne = time.monotonic() + 60\\nwhile time.monotonic() < e: pass"])
seen, dropped, started = [], None, time.monotonic()
try:
    for step in helpers.progress(range(100_000), desc="load"):
        model(x).sum().backward()
        seen.append(torch.get_num_threads())
        if dropped is None and seen[-1] < max(seen):
            dropped = time.monotonic()
        if dropped and time.monotonic() - dropped > 1 or time.monotonic() - started > 30:
            break
finally:
    neighbour.kill(); neighbour.wait()
after, started = [], time.monotonic()
for step in helpers.progress(range(100_000), desc="idle again"):
    model(x).sum().backward()
    after.append(torch.get_num_threads())
    if after[-1] == max(seen) and time.monotonic() - started > 1 or time.monotonic() - started > 30:
        break
print("busy", max(seen), min(seen), "idle", after[-1])
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: there is no thread to give up")
def test_a_real_kernel_gives_a_busy_neighbour_a_core_and_takes_it_back(tmp_path):
    cores = len(os.sched_getaffinity(0))
    printed = "".join(_run_in_fresh_kernel(FOLLOWS_THE_LOAD, tmp_path)).split()
    assert printed[-6:] == ["busy", str(cores), str(cores - 1), "idle", str(cores)], printed[-6:]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: there is no thread to give up")
def test_a_cell_starts_with_the_threads_the_load_allows(tmp_path):
    """A student's own training loop does not go through helpers.progress: the kernel sets the
    threads before each cell."""
    cores = len(os.sched_getaffinity(0))
    printed = "".join(_run_in_fresh_kernel([
        "import subprocess, sys, time, helpers, torch\n"
        "neighbour = subprocess.Popen([sys.executable, '-c', 'import time\\ne = time.monotonic() + 60\\nwhile time.monotonic() < e: pass'])",
        "time.sleep(2)",  # the kernel waits while the neighbour works
        "print('threads', torch.get_num_threads()); neighbour.kill(); neighbour.wait()",
    ], tmp_path))
    assert printed.split() == ["threads", str(cores - 1)]


@pytest.mark.parametrize("others, cores, threads", [
    (0.0, 2, 2), (0.3, 2, 2),  # a browser at rest is not a busy program
    (0.6, 2, 1), (1.0, 2, 1), (2.0, 2, 1),  # one or two busy programs on 2 cores: never fewer than one
    (1.0, 8, 7), (2.4, 8, 6), (0.0, 1, 1),
])
def test_torch_gets_one_thread_fewer_per_busy_program(others, cores, threads):
    assert threads_for(others, cores) == threads


def test_a_load_that_cannot_be_gets_a_clear_error():
    with pytest.raises(ValueError, match="others must be >= 0"):
        threads_for(-1.0, 2)


@pytest.mark.parametrize("policy, said", [("PASSIVE", "passive"), ("ACTIVE", "as set by the environment")])
def test_a_policy_named_in_the_environment_is_kept_and_the_threads_stay(tmp_path, policy, said):
    """The grader and the build name PASSIVE: a grade never depends on what else the machine ran."""
    source = (f"import os\nos.environ[{WAIT_POLICY_ENV!r}] = {policy!r}\n" + PROBE
              + "print('follows the load:', helpers.cpu.share_cores() is not None)")
    first, second = "".join(_run_in_fresh_kernel(source, tmp_path)).strip().split("\n")
    assert first == f"{said} {policy} {len(os.sched_getaffinity(0))}"
    assert second == "follows the load: False"


def test_a_script_that_loaded_torch_first_keeps_its_threads():
    import subprocess
    import sys

    code = "import torch; torch.set_num_threads(2); import helpers; print(helpers.threading_policy(), torch.get_num_threads())"
    env = {key: value for key, value in os.environ.items() if key != WAIT_POLICY_ENV}
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert printed.split() == ["as", "torch", "set", "it", "2"]
