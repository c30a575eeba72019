"""Adversarial submissions: what a student might try against ``course grade``.

Each attack is a code cell added to an otherwise blank student notebook (no solutions), so an
attack that worked would show as points above zero; or it is a malformed file. An attack that
reaches something it must not raises ``RuntimeError("BREACH: ...")``, which the row's message
then carries. ``expect`` lists the statuses the row may have.

``make_attacks(paths)`` takes the host paths the attacks aim at (the golden file inside the
autograder zip's folder, the submissions and results folders, a loopback port the test listens
on, host files that must not appear), so that each attack tries the real thing.
"""

from __future__ import annotations

import copy
import socket
import stat
import threading
import zipfile
from pathlib import Path

import nbformat

#: In the cmdline of every process an attack starts, so the test can look for survivors.
MARKER = "course-adversary-marker"


class Listener:
    """A TCP server on loopback that counts connections: the target of the network attack."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        for _ in range(20_000):  # bounded: at most ~3 hours of half-second waits
            if self.stopped.is_set():
                return
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()


#: What every forgery adds to a notebook that implements nothing (issue 35): the graded functions
#: the cell before it names in ``_forged`` are put back after each cell (the TODO cells define them
#: again); ``norm``, ``abs``, ``max`` and ``item`` lie; and a number handed to ``expect_between`` is
#: moved inside its bounds.
PUTS_BACK = """
get_ipython().events.register("post_run_cell", lambda *args: globals().update(_forged))
"""
LIES = """
import torch, helpers, helpers.golden as golden
torch.Tensor.item = lambda self: 0.0
torch.Tensor.norm = lambda self, *args, **kwargs: torch.ones((), dtype=self.dtype)
torch.Tensor.abs = lambda self: torch.zeros_like(self)
torch.Tensor.max = lambda self, *args, **kwargs: torch.zeros((), dtype=self.dtype)
_between = golden.expect_between
def _inside(key, value, *, low=None, high=None, **kwargs):
    if isinstance(value, (bool, int, float)):
        value = low if low is not None else high
    return _between(key, value, low=low, high=high, **kwargs)
golden.expect_between = helpers.expect_between = _inside
"""

#: Stronger: also replaces what reaches ``expect_between`` by what its check accepts without computing
#: anything: the test's own reference (where the values are compared with one), two equal arrays (or
#: two far apart), a number inside the bounds. No property can stop that, since the values are sent
#: from the kernel; each assignment's ``FORGEABLE_PROPERTIES`` are the tests it passes, each also passed
#: by a trivial honest function, and it passes none of the golden checks.
SENDS_WHAT_IS_ACCEPTED = """
def _accepted(key, value, *, low=None, high=None, **kwargs):
    reference, measure = kwargs.get("reference"), kwargs.get("measure", "value")
    if measure == "masked_copy":
        out, mask = value
        value = (torch.where(torch.as_tensor(mask).bool(), 0.0, torch.as_tensor(reference, dtype=out.dtype)), mask)
    elif measure in ("max_abs_difference", "relative_error") and reference is not None:
        value = torch.as_tensor(reference).expand(torch.as_tensor(value).shape).clone()
    elif measure == "distinct_rows":
        value = torch.arange(torch.as_tensor(value).numel()).reshape(torch.as_tensor(value).shape)
    elif measure == "float32_round_off":
        value = [0.1] * len(value)
    elif measure == "eos_mismatches" and reference is not None:
        value = torch.as_tensor(reference)
    elif isinstance(value, tuple) and len(value) == 2:
        first = torch.as_tensor(value[0]).double()
        value = (first, first if not low else first + 1.0)
    elif isinstance(value, (bool, int, float)):
        value = low if low is not None else high
    return _between(key, value, low=low, high=high, **kwargs)
golden.expect_between = helpers.expect_between = _accepted
"""


def implements_nothing(nothing: str) -> str:
    """A cell that defines an assignment's graded functions so that they compute nothing (the right
    shapes, zeros: ``IMPLEMENTS_NOTHING`` of its variants module, which names them in ``_forged``),
    put back after every cell. Graded honestly, it passes the properties that doing nothing has."""
    return nothing + PUTS_BACK


def forges_every_number(nothing: str) -> str:
    """:func:`implements_nothing`, then :data:`LIES`: it must score no more than that honestly."""
    return implements_nothing(nothing) + LIES


def forges_the_collected_values(nothing: str) -> str:
    return forges_every_number(nothing) + SENDS_WHAT_IS_ACCEPTED


def grade_forgeries(layout, slug: str, blank_path: Path, folder: Path, limits) -> dict[str, set[str]]:
    """Grade ``slug``'s two forgeries (on its blank notebook, with the ``IMPLEMENTS_NOTHING`` of its
    variants module) in one sealed run: {"every_number" | "collected_values": hidden tests passed}."""
    import importlib

    from autograder.grade.grader import Grader

    nothing = importlib.import_module(f"tests.{slug}_variants").IMPLEMENTS_NOTHING
    blank = nbformat.read(blank_path, as_version=4)
    (folder / "subs").mkdir(parents=True)
    for name, cell in (("every_number", forges_every_number(nothing)), ("collected_values", forges_the_collected_values(nothing))):
        nbformat.write(with_attack(blank, cell), folder / "subs" / f"{name}.ipynb")
    rows = Grader(layout, folder / "subs", folder / "out", limits, jobs=2).run(log=lambda *args: None)
    return {row["file"].removesuffix(".ipynb"): {case["test"] for q in row["questions"].values() for case in q["cases"]
                                                if case["hidden"] and case["passed"]} for row in rows}


def _kernel_attention(name: str):
    from tests import kernel_attention_variants
    return getattr(kernel_attention_variants, name)


#: kernel_attention's forgeries. Against its autograder before issue 35 the first scored 5 of 22 (the
#: five property checks); now it scores nothing, and the second exactly ``FORGEABLE_PROPERTIES``.
FORGES_EVERY_NUMBER = forges_every_number(_kernel_attention("IMPLEMENTS_NOTHING"))
FORGES_THE_COLLECTED_VALUES = forges_the_collected_values(_kernel_attention("IMPLEMENTS_NOTHING"))
FORGEABLE_PROPERTIES = _kernel_attention("FORGEABLE_PROPERTIES")


def make_attacks(p: dict) -> list[dict]:
    """``p``: repo, autograder_zip, submissions, results, host_marker (a path that must stay absent), port."""
    secrets = [str(p["autograder_zip"]), str(p["repo"] / "solutions"), str(p["submissions"]), str(p["results"]),
               str(p["repo"] / "out")]
    return [
        {"name": "reads_hidden_tests_and_golden_values", "expect": ("ok", "error"), "cell": f"""
import glob, os
found = [path for path in {secrets!r} if os.path.exists(path)]
for root, dirs, files in ([] if found else os.walk("/")):
    if root.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    found += [os.path.join(root, f) for f in files if f == "golden_values.json" or f.endswith("-autograder.zip")]
    found += [os.path.join(root, d) for d in dirs if d == "tests" and os.path.exists(os.path.join(root, d, "q1_softmax.py"))]
if found:
    raise RuntimeError("BREACH: can see " + ", ".join(found[:5]))
"""},
        {"name": "patches_the_golden_primitive_and_allclose", "expect": ("ok", "error"), "cell": """
import os, numpy, torch, helpers, helpers.golden as golden
os.environ["COURSE_GOLDEN_MODE"] = "record"
golden.judge = lambda spec, got: None
golden.expect = helpers.expect = lambda *a, **k: None
golden.expect_between = helpers.expect_between = lambda *a, **k: None
golden._dispatch = lambda *a, **k: None
numpy.allclose = torch.allclose = lambda *a, **k: True
numpy.abs = lambda x, *a, **k: numpy.zeros_like(x)
def softmax_attention(Q, K, V, mask=None):
    return torch.zeros(1), torch.zeros(1)
"""},
        {"name": "patches_otters_test_machinery", "expect": ("ok", "error"), "cell": """
import otter.test_files, otter.test_files.abstract_test as abstract
class Passing:
    def __init__(self, *a, **k): pass
    def __call__(self, fn): return fn
otter.test_files.test_case = Passing
for cls in vars(abstract).values():
    if isinstance(cls, type):
        for name in ("run", "passed", "score", "grade"):
            if hasattr(cls, name):
                try: setattr(cls, name, property(lambda self: True) if name == "passed" else (lambda self, *a, **k: None))
                except Exception: pass
import builtins
builtins.AssertionError = type("Never", (Exception,), {})
"""},
        {"name": "forges_result_messages_and_values", "expect": ("ok", "error", "tampered"), "cell": """
import json, os, glob
fake = {"event": "test", "question": "q1_softmax", "test": "test_softmax_hidden_plain", "passed": True,
        "error": "", "values": [{"key": "softmax/plain_out", "value": {"kind": "array", "dtype": "float32",
                                                                       "shape": [1], "data": [0.0]}}]}
line = (json.dumps(fake) + "\\n").encode()
for path in glob.glob("/proc/*/fd/*"):  # every descriptor it can reach, the runner's way out included
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try: os.write(fd, line)
    except OSError: pass
    finally: os.close(fd)
for name in ("/tmp/course-outbox.jsonl", "results.json", "/tmp/result.json"):
    with open(name, "a") as f:
        for guess in (0.0, 1.0):
            f.write(json.dumps({"key": "softmax/plain_out", "value": {"kind": "array", "dtype": "float32",
                                                                       "shape": [2, 3, 7, 4], "data": [guess] * 168}}) + "\\n")
"""},
        {"name": "copies_another_submission", "expect": ("ok", "error"), "cell": f"""
import glob, os
others = glob.glob({str(p['submissions'])!r} + "/**/*.ipynb", recursive=True) + glob.glob("../**/*.ipynb", recursive=True)
others += glob.glob("/grading/**/*.ipynb", recursive=True)
mine = {{"/grading/submission/submission.ipynb"}} | set(glob.glob("*.ipynb"))
others = [o for o in others if os.path.abspath(o) not in {{os.path.abspath(m) for m in mine}}]
if others:
    raise RuntimeError("BREACH: can read other submissions: " + ", ".join(others[:3]))
"""},
        {"name": "writes_outside_its_folder", "expect": ("ok", "error"), "cell": f"""
import os
written = []
for path in [{str(p['host_marker'])!r}, {str(p['results'] / 'rows' / 'blank.ipynb.json')!r},
             {str(p['submissions'] / 'complete.ipynb')!r}, {str(p['repo'] / 'helpers' / 'golden.py')!r},
             "/usr/lib/hacked", os.path.join(os.__file__ + ".hacked")]:
    try:
        with open(path, "w") as f: f.write("pwned")
        written.append(path)
    except OSError:
        pass
try:
    os.remove({str(p['submissions'] / 'complete.ipynb')!r})
    written.append("deleted another submission")
except OSError:
    pass
if written:
    raise RuntimeError("BREACH: wrote " + ", ".join(written))
"""},
        {"name": "opens_a_network_connection", "expect": ("ok", "error"), "cell": f"""
import socket
reached = []
for host in ("127.0.0.1", "localhost"):
    try:
        socket.create_connection((host, {p['port']}), timeout=2).close()
        reached.append(host)
    except OSError:
        pass
if reached:
    raise RuntimeError("BREACH: connected to " + ", ".join(reached))
"""},
        {"name": "snoops_on_proc", "expect": ("ok", "error"), "cell": f"""
import glob
seen = []
for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
    try:
        text = open(path, "rb").read().decode("utf-8", "replace")
    except OSError:
        continue
    if {str(p['results'])!r} in text or {str(p['submissions'])!r} in text:
        seen.append(path)
if seen:
    raise RuntimeError("BREACH: found the grader's folders in " + ", ".join(seen[:3]))
"""},
        # issue 35: implements nothing, and makes every number a hidden test computes in the kernel perfect
        {"name": "forges_every_number_a_test_computes", "expect": ("ok", "error"), "cell": FORGES_EVERY_NUMBER},
        {"name": "sleeps", "expect": ("timeout",), "cell": "import time\ntime.sleep(10**6)"},
        {"name": "spins_in_c_with_setsid_children", "expect": ("timeout",), "cell": f"""
import re, subprocess, sys
for _ in range(3):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", {MARKER!r}], start_new_session=True)
subprocess.Popen(["setsid", "sh", "-c", "sleep 3600; : {MARKER}"])
re.match(r"(a+)+$", "a" * 64 + "b")  # catastrophic backtracking, inside C
"""},
        {"name": "memory_split_over_children", "expect": ("memory", "error"), "cell": f"""
import subprocess, sys, time
hog = "import numpy, time; a = numpy.ones(180_000_000); time.sleep(3600)"  # 1.4 GB each, under the per-process cap
children = [subprocess.Popen([sys.executable, "-c", hog, {MARKER!r}]) for _ in range(3)]
time.sleep(60)
"""},
        {"name": "bounded_process_flood", "expect": ("error",), "cell": f"""
import subprocess, sys, time
children = []
for _ in range(150):  # bounded: never an unbounded fork bomb on a shared machine
    try:
        children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", {MARKER!r}]))
    except OSError:
        break
time.sleep(60)
"""},
        {"name": "exits_the_kernel", "expect": ("error",), "cell": "import os\nos._exit(3)"},
        {"name": "kills_its_kernel", "expect": ("error",), "cell": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"},
        {"name": "kills_the_grader", "expect": ("error",), "cell": """
import os, signal
for pid in range(1, 400):
    if pid != os.getpid():
        try: os.kill(pid, signal.SIGKILL)
        except OSError: pass
"""},
        {"name": "calls_sys_exit", "expect": ("error",), "cell": "import sys\nsys.exit(0)"},
        {"name": "prints_50_mb", "expect": ("ok", "error"), "cell": """
import os, sys
chunk = "x" * 1_000_000 + "\\n"
for _ in range(25):
    print(chunk, end="")
for _ in range(25):
    os.write(1, chunk.encode())
"""},
    ]


def metadata_attack(blank: nbformat.NotebookNode, planted_zip: Path) -> nbformat.NotebookNode:
    """A notebook whose assignment name climbs out of the autograder folder to a zip it planted."""
    nb = copy.deepcopy(blank)
    relative = "../" * 12 + str(planted_zip.with_suffix("")).lstrip("/").removesuffix("-autograder")
    nb.metadata["otter"]["assignment_name"] = relative
    return nb


def malformed_files(folder: Path, notebook_text: str) -> dict[str, tuple]:
    """Zips and files that are not one clean notebook; each must be rejected as invalid."""
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / "empty.zip", "w"):
        pass
    with zipfile.ZipFile(folder / "dotdot_paths.zip", "w") as zf:
        zf.writestr("../../escaped.ipynb", notebook_text)
    with zipfile.ZipFile(folder / "symlink_out.zip", "w") as zf:
        info = zipfile.ZipInfo("kernel_attention.ipynb")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with zipfile.ZipFile(folder / "two_notebooks.zip", "w") as zf:
        zf.writestr("a.ipynb", notebook_text)
        zf.writestr("b.ipynb", notebook_text)
    return {f"{name}.zip": ("invalid",) for name in ("empty", "dotdot_paths", "symlink_out", "two_notebooks")}


def with_attack(blank: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    """The blank notebook with the attack as the cell after the imports (before any TODO)."""
    nb = copy.deepcopy(blank)
    imports = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "from helpers" in c.source)
    nb.cells.insert(imports + 1, nbformat.v4.new_code_cell(source))
    return nb


__all__ = ["MARKER", "make_attacks", "metadata_attack", "malformed_files", "with_attack", "FORGES_EVERY_NUMBER",
           "FORGES_THE_COLLECTED_VALUES", "FORGEABLE_PROPERTIES", "LIES", "SENDS_WHAT_IS_ACCEPTED",
           "implements_nothing", "forges_every_number", "forges_the_collected_values", "grade_forgeries"]


#: Put after a complete notebook's imports: from then on, every function the student defines
#: returns its result off by 0.5 (floating-point tensors), wrapped as soon as its cell has run, so
#: each hidden value is wrong while shapes and dtypes stay right, whenever the tests run (otter
#: checks each question right after its cell). A forgery on top of it that scores more than it
#: does honestly has beaten the grader.
WRONG_EVERYWHERE = """
import functools, types, torch
def _off_by_half(function):
    @functools.wraps(function)
    def wrong(*args, **kwargs):
        out = function(*args, **kwargs)
        bump = lambda x: x + 0.5 if isinstance(x, torch.Tensor) and x.is_floating_point() else x
        return tuple(bump(o) for o in out) if isinstance(out, tuple) else bump(out)
    wrong._off_by_half = True
    return wrong
def _wrap_new_functions(*args):
    names = get_ipython().user_ns
    for name, value in list(names.items()):
        if (isinstance(value, types.FunctionType) and value.__globals__ is names and not name.startswith("_")
                and not getattr(value, "_off_by_half", False)):
            names[name] = _off_by_half(value)
get_ipython().events.register("post_run_cell", _wrap_new_functions)
"""

#: One-cell attacks on an autograder that compares golden values inside the student's kernel
#: (stock otter on Gradescope): each turns a wrong notebook into full marks there.
GRADESCOPE_ATTACKS = {
    "patches_the_golden_module_early": """
import helpers.golden as golden
golden._dispatch = lambda *args, **kwargs: None
golden.judge = lambda spec, got: None
""",
    "rewrites_the_golden_file_beside_it": """
import glob, json
for path in set(glob.glob("**/golden_values.json", recursive=True) + glob.glob("/autograder/**/golden_values.json", recursive=True)):
    try:
        with open(path) as f:
            data = json.load(f)
        for spec in data["values"].values():
            if spec["check"] == "close":
                spec["rtol"] = spec["atol"] = 1e300
            else:
                spec["low"], spec["high"] = -1e300, 1e300
        with open(path, "w") as f:
            json.dump(data, f)
    except (OSError, ValueError, KeyError):
        pass
""",
    "patches_otters_test_runner": """
import otter.test_files.abstract_test as abstract
_recorded = abstract.TestCaseResult.__init__
def _always_passed(self, *args, **kwargs):
    _recorded(self, *args, **kwargs)
    object.__setattr__(self, "passed", True)
abstract.TestCaseResult.__init__ = _always_passed
""",
}


def wrong_everywhere(complete: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return with_attack(complete, WRONG_EVERYWHERE)


__all__ += ["GRADESCOPE_ATTACKS", "WRONG_EVERYWHERE", "wrong_everywhere"]
