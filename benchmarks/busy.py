"""A notebook's time on an idle machine and beside one busy program, side by side (issue 36).

A student's laptop is never idle: a browser, a video call, a second kernel. This runs the solved
student notebook top to bottom in a fresh kernel, started as JupyterLab starts one (no thread
settings in its environment: the notebook's own first cell must choose them), first on the idle
machine, then beside one CPU-bound program that the benchmark starts and stops (bounded in time).
It prints the whole notebook's time and its training time (the cells sized by the setting) for
both, and their ratio; the target is a busy run within 1.6x of the idle one on 2 cores.

Every ``benchmarks/<slug>.py`` takes it: ``benchmarks/<slug>.py --quick --busy`` (``--full`` for the
full setting; ``--spin-baseline`` adds an idle run with torch's default threads held fixed, as the
notebooks ran before they followed the load: the idle run may be at most 10% slower than it). ``benchmarks/busy.py --idle [--full]`` runs the idle
run alone. The figures are recorded in ``benchmarks/figures.json``, where the site's figures page and the
notebooks' stated times come from: :func:`stated_times` writes the one sentence of a notebook's
introduction that says how long it takes, and ``tests/assignments/test_stated_times.py`` holds each notebook to it.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import subprocess
import sys
from contextlib import contextmanager

from reference import REPO, run_solved_notebook

FIGURES = REPO / "benchmarks" / "figures.json"
TARGET_RATIO = 1.6
THREAD_SETTINGS = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GOMP_SPINCOUNT")


@contextmanager
def busy_neighbour(limit_seconds: float):
    """One single-threaded CPU-bound program beside the notebook; it stops by itself after
    ``limit_seconds`` if the benchmark dies."""
    loop = f"import time\nend = time.monotonic() + {limit_seconds:.0f}\nwhile time.monotonic() < end:\n    pass\n"
    neighbour = subprocess.Popen([sys.executable, "-c", loop])
    try:
        yield neighbour
    finally:
        neighbour.kill()
        neighbour.wait()


def _seconds(cell) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    return (dt.datetime.fromisoformat(end.replace("Z", "+00:00"))
            - dt.datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


#: Calls that return the setting's sizes: ``budget(full=..., quick=..., grading=...)`` and the helpers
#: that wrap it (pretraining's ``experiment()``).
SIZED_BY = {"budget", "experiment"}


def _sized_cells(nb) -> list:
    """Code cells that size themselves by the setting: they call ``budget()`` (or a wrapper), or use a
    name an earlier cell bound to what one returned (``steps = budget(...)``, ``exp = experiment()``)."""
    sized_names: set[str] = set()
    cells = []
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(n, ast.Call) and getattr(n.func, "id", None) in SIZED_BY
                                                    for n in ast.walk(node.value)):
                sized_names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if calls & SIZED_BY or loads & sized_names:
            cells.append(cell)
    return cells


def training_seconds(nb) -> float:
    """Seconds spent in the cells sized by the setting (:func:`_sized_cells`): training and timing,
    the part of a notebook that a slow laptop stretches."""
    return sum(_seconds(cell) for cell in _sized_cells(nb))


#: A last cell that prints how many of the kernel's load measurements chose each thread count.
THREADS_MARK = "THREAD CHOICES "
READ_THREAD_CHOICES = f"import helpers.cpu, json\nprint({THREADS_MARK!r} + json.dumps(helpers.cpu.thread_choices()))"


def run_as_a_student(slug: str, setting: str, spin: bool = False) -> tuple[float, float, dict]:
    """(whole notebook seconds, training seconds, {threads: times chosen}) of the solved notebook in a
    kernel whose environment has no thread settings, as a student's JupyterLab would start it (the
    kernel then follows the load, ``helpers.cpu``). ``spin``: torch's default threads held fixed
    instead (an empty ``OMP_WAIT_POLICY``: ``helpers`` keeps a policy the environment names, and
    OpenMP reads an empty one as unset), the baseline for the idle run's cost."""
    import nbformat

    saved = {key: os.environ.pop(key) for key in THREAD_SETTINGS if key in os.environ}
    if spin:
        os.environ["OMP_WAIT_POLICY"] = ""
    try:
        seconds, nb = run_solved_notebook(slug, setting, edit=lambda cells: [*cells, nbformat.v4.new_code_cell(READ_THREAD_CHOICES)])
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)
        os.environ.update(saved)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    choices = json.loads(printed.split(THREADS_MARK, 1)[1].splitlines()[0])
    return seconds, training_seconds(nb), choices  # the added cell sizes nothing: training_seconds skips it


def record(slug: str, setting: str, figures_of_run: dict) -> dict:
    """Store one run's figures for ``slug`` in ``setting`` in figures.json (a run measured idle only
    drops the busy figures of an earlier run: the two belong together)."""
    figures = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    figures.setdefault(slug, {})[setting] = {**figures_of_run, "cores": len(os.sched_getaffinity(0)),
                                             "measured": dt.date.today().isoformat()}
    FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return figures[slug][setting]


def measure_idle(slug: str, setting: str) -> dict:
    """The idle run alone: what a notebook's stated times come from."""
    print(f"{slug}, {setting} setting, {len(os.sched_getaffinity(0))} cores: idle run ...", flush=True)
    idle = run_as_a_student(slug, setting)
    print(f"  idle: notebook {idle[0]:.0f} s, training {idle[1]:.0f} s; threads chosen {_choices(idle[2])}", flush=True)
    return record(slug, setting, {"notebook_seconds": round(idle[0], 1), "training_seconds": round(idle[1], 1),
                                  "thread_choices": {"idle": idle[2]}})


def _choices(chosen: dict) -> str:
    return ", ".join(f"{threads} thread{'s' * (int(threads) != 1)} x{times}" for threads, times in sorted(chosen.items())) or "none"


def duration(seconds: float) -> str:
    """How a notebook states a time: under a minute, else minutes to the half (whole from ten)."""
    if seconds < 45:
        return "under a minute"
    minutes = seconds / 60
    minutes = round(minutes * 2) / 2 if minutes < 10 else round(minutes)
    return f"about {minutes:g} minute{'' if minutes == 1 else 's'}"


#: How the sentence begins in a master's introduction (a line of its own).
STATED_TIMES_START = "**Time** (an idle 2-core laptop):"


def stated_times(figures: dict) -> str:
    """The one sentence of a notebook's introduction that says how long it takes, from its figures
    (``figures.json[slug]``): both settings, training and the whole notebook, idle, 2 cores. A
    notebook that trains nothing has no settings to tell apart: one figure, its last measured."""
    def cost(f: dict) -> str:
        training = "no training" if f["training_seconds"] == 0 else f"{duration(f['training_seconds'])} of training"
        return f"{training} and {duration(f['notebook_seconds'])} for the whole notebook"

    if all(f["training_seconds"] == 0 for f in figures.values()):
        latest = max(figures.values(), key=lambda f: f["measured"])
        return f"{STATED_TIMES_START} {cost(latest)}."
    return f"{STATED_TIMES_START} full setting (the default), {cost(figures['full'])}; quick setting, {cost(figures['quick'])}."


def readme_table(figures: dict) -> str:
    """The figures page's table of the quick setting from figures.json: idle, idle with torch's default threads
    held fixed (the baseline of the idle run's cost), and beside one busy program."""
    rows = ["| notebook | idle | idle, torch's default threads held fixed | idle / fixed | beside one busy program "
            "| busy / idle | measured |", "|---|---|---|---|---|---|---|"]
    for slug, settings in sorted(figures.items()):
        f = settings["quick"]
        training = "no training" if f["training_seconds"] == 0 else f"training {f['training_seconds']:.0f} s"
        busy_training = "" if f["training_seconds"] == 0 else f" ({f['busy_training_seconds']:.0f} s)"
        fixed = f.get("default_wait_notebook_seconds")
        baseline = ("not measured", "") if fixed is None else (f"{fixed:.0f} s", f"{f['notebook_seconds'] / fixed:.2f}")
        rows.append(f"| {slug} | {f['notebook_seconds']:.0f} s ({training}) | {baseline[0]} | {baseline[1]} "
                    f"| {f['busy_notebook_seconds']:.0f} s{busy_training} "
                    f"| {f['busy_notebook_seconds'] / f['notebook_seconds']:.2f} | {f['measured']} |")
    return "\n".join(rows)


def write_stated_times(slug: str) -> bool:
    """Put :func:`stated_times` of the recorded figures into the master's introduction, in place of
    its line that starts with :data:`STATED_TIMES_START`; True if the master changed (then run
    ``course build`` for the student notebook)."""
    import nbformat

    path = REPO / "solutions" / slug / f"{slug}.ipynb"
    sentence = stated_times(json.loads(FIGURES.read_text())[slug])
    nb = nbformat.read(path, as_version=4)
    for cell in (c for c in nb.cells if c.cell_type == "markdown"):
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            if line.startswith(STATED_TIMES_START):
                if line == sentence:
                    return False
                lines[i] = sentence
                cell.source = "\n".join(lines)
                nbformat.write(nb, path)
                return True
    raise SystemExit(f"{path}: no line starts with {STATED_TIMES_START!r}")


def compare(slug: str, setting: str, spin_baseline: bool = False) -> dict:
    """Run idle, then beside a busy program; print both and record them in figures.json.
    ``spin_baseline``: first an idle run with torch's default threads held fixed, the baseline of the
    idle run (target: at most 10% slower)."""
    cores = len(os.sched_getaffinity(0))
    spin = None
    if spin_baseline:
        print(f"{slug}, {setting} setting, {cores} cores: idle run, torch's default threads held fixed ...", flush=True)
        spin = run_as_a_student(slug, setting, spin=True)
    print(f"{slug}, {setting} setting, {cores} cores: idle run ...", flush=True)
    idle = run_as_a_student(slug, setting)
    print(f"  idle: notebook {idle[0]:.0f} s, training {idle[1]:.0f} s; now beside one busy program ...", flush=True)
    with busy_neighbour(limit_seconds=10 * idle[0] + 300):
        busy = run_as_a_student(slug, setting)
    ratio = busy[0] / idle[0]
    print(f"\n{'':22}{'idle':>9}{'busy':>9}{'busy/idle':>11}")
    print(f"{'whole notebook (s)':22}{idle[0]:9.0f}{busy[0]:9.0f}{ratio:11.2f}")
    print(f"{'training cells (s)':22}{idle[1]:9.0f}{busy[1]:9.0f}{busy[1] / max(idle[1], 1e-9):11.2f}")
    if spin:
        print(f"{'idle, default waiting':22}{spin[0]:9.0f}{'':9}{idle[0] / spin[0]:11.2f}  (notebooks' / fixed default, idle)")
    print(f"threads the kernel chose (times): idle {_choices(idle[2])}; busy {_choices(busy[2])}")
    print(f"target: busy within {TARGET_RATIO}x of idle: {'met' if ratio <= TARGET_RATIO else 'NOT met'}")
    return record(slug, setting, {
        "notebook_seconds": round(idle[0], 1), "training_seconds": round(idle[1], 1),
        "busy_notebook_seconds": round(busy[0], 1), "busy_training_seconds": round(busy[1], 1),
        **({"default_wait_notebook_seconds": round(spin[0], 1)} if spin else {}),
        "thread_choices": {"idle": idle[2], "busy": busy[2]},
    })


def compare_when_asked(slug: str) -> bool:
    """If the command line says ``--busy``, run the comparison and return True (the script's own
    benchmark is then skipped); ``--quick`` or ``--full`` picks the setting (quick by default)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--spin-baseline", action="store_true")
    args, _ = parser.parse_known_args()
    if not args.busy:
        return False
    compare(slug, "full" if args.full else "quick", args.spin_baseline)
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="*", help="assignments (default: all seven)")
    parser.add_argument("--full", action="store_true", help="the full setting instead of the quick one")
    parser.add_argument("--spin-baseline", action="store_true",
                        help="also an idle run with torch's default threads held fixed, the idle run's baseline")
    parser.add_argument("--idle", action="store_true", help="the idle run only (the figures the notebooks state)")
    parser.add_argument("--write-times", action="store_true",
                        help="measure nothing: write the recorded figures into the masters' time sentence")
    args = parser.parse_args()
    slugs = args.slugs or sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())
    for slug in slugs:
        if args.write_times:
            print(f"{slug}: {'rewritten' if write_stated_times(slug) else 'already in step'}")
        elif args.idle:
            measure_idle(slug, "full" if args.full else "quick")
        else:
            compare(slug, "full" if args.full else "quick", args.spin_baseline)
    recorded = json.loads(FIGURES.read_text())
    for slug in slugs:
        try:
            print(f"{slug}: {stated_times(recorded[slug])}")
        except KeyError:
            print(f"{slug}: not every setting measured yet ({', '.join(recorded.get(slug, {})) or 'none'})")
