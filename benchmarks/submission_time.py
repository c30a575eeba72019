"""Where one sealed submission's time goes, for every assignment, beside otter and nbclient alone.

For each assignment the complete sample (every TODO solved, from the committed student notebook)
is graded one at a time, on an otherwise quiet machine if the figures are to mean anything:

- **nbclient alone**, unsandboxed, the grading setting, the cells grading runs (public checks and
  the export skipped, as the sandbox's runner skips them): the kernel's start, the first code cell
  (the imports), the rest of the cells, and the five slowest cells;
- **sealed**, through the grader's own sandbox session (``course grade``'s path): the session's
  start and its fork server's readiness (once per run, shared by every submission), the sandbox
  until the runner says the cells ran (sandbox and kernel start, imports, cells), the tests inside
  the sandbox, the judge outside.
  The benchmark waits for the fork server's imports (once per run, printed apart) before it grades
  anything, then grades each sample twice in the same session: the first of an assignment also pays
  what the session does once (the fork server importing transformers' model code, for the first
  assignment whose tests load a pretrained model; the import of a measure's library, which the pool
  starts beside the first sandbox as course grade's does, and the judge waits for if it is not done),
  the second is what every later submission of a class costs. The ratios use the second; the first
  is printed and kept beside it;
- **otter run** with the same autograder zip (otter's own path, golden values compared in the
  student's kernel).

It prints the parts and the ratios sealed / otter run and sealed / nbclient, and with ``--record``
keeps them in ``benchmarks/submission_time.json`` (the site's figures page shows them).

    .venv/bin/python benchmarks/submission_time.py [SLUG ...] [--sandbox posix] [--record] [--note TEXT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.grade.grader import Limits
from autograder.judge.verdicts import verdict
from autograder.layout import Layout
from autograder.samples import write_samples
from autograder.sandbox.runner import SKIPPED_CELL
from autograder.sandbox.choose import SANDBOX_MODES
from autograder.sandbox.session import SandboxPool
from grading_speed import path_without_latex

ASSIGNMENTS = ("kernel_attention", "karate_gnn", "autoencoders", "visualizing_attention", "summarization",
               "attention_foundations", "pretraining")
RECORD = Path(__file__).with_name("submission_time.json")
LIMITS = Limits(timeout=600, memory_mb=6144)  # generous: the figures are times, not a limit test
SLOWEST_CELLS = 5  # listed for each assignment, with their seconds under nbclient alone


def _grading_env() -> dict:
    return dict(os.environ, COURSE_SETTING="grading", PATH=path_without_latex())


def nbclient_alone(nb, workdir: Path) -> dict:
    """Seconds of the kernel's start, the first code cell, the other cells, and the slowest cell."""
    from nbclient import NotebookClient

    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    saved = dict(os.environ)
    os.environ.update(_grading_env())  # the kernel inherits it
    try:
        client = NotebookClient(nb, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(workdir)}})
        started = time.perf_counter()
        times = []
        with client.setup_kernel():
            kernel = time.perf_counter() - started
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code" or not cell.source.strip() or SKIPPED_CELL.fullmatch(cell.source.strip()):
                    continue
                began = time.perf_counter()
                client.execute_cell(cell, index)
                times.append((time.perf_counter() - began, cell.source.strip().splitlines()[0][:50]))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    slowest = max(times)
    return {"kernel_start": kernel, "first_cell": times[0][0], "other_cells": sum(t for t, _ in times[1:]),
            "slowest_cell": slowest[0], "slowest_cell_starts": slowest[1],
            # where trimming the grading setting could pay: the cells that take most
            "slowest_cells": [[round(t, 2), start] for t, start in sorted(times, reverse=True)[:SLOWEST_CELLS]],
            "total": kernel + sum(t for t, _ in times)}


def sealed(pool: SandboxPool, zip_path: Path, text: str) -> dict:
    """Seconds of one submission through the grader's sandbox session, by part."""
    autograder = pool.autograder(zip_path)
    started = time.perf_counter()
    run = pool._run(autograder, text, LIMITS, tests=autograder.sources, return_notebook=False)
    ran = time.perf_counter()
    judged = verdict(run, autograder, LIMITS)
    done = time.perf_counter()
    if judged["status"] != "ok" or judged["total"] != judged["possible"]:
        raise RuntimeError(f"the complete sample did not get full marks sealed: {judged['status']} {judged['message']}")
    cells = run.cells_seconds or run.seconds
    return {"sandbox_to_cells_done": cells, "tests": run.seconds - cells, "judge": done - ran,
            "total": done - started}


def otter_run(zip_path: Path, nb, workdir: Path, slug: str) -> float:
    workdir.mkdir()
    nbformat.write(nb, workdir / f"{slug}.ipynb")
    otter = Path(sys.executable).with_name("otter")
    started = time.perf_counter()
    done = subprocess.run([str(otter), "run", "-a", str(zip_path), "-o", str(workdir), f"{slug}.ipynb"], cwd=workdir,
                          env=_grading_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"otter run failed: {done.stderr[-800:]}")
    return time.perf_counter() - started


def measure(layout: Layout, slugs: list[str], sandbox: str | None = None) -> dict:
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        private = tmp / "zips"
        private.mkdir(mode=0o700)
        started = time.perf_counter()
        with SandboxPool(jobs=1, mode=sandbox, warm_judge=True) as pool:  # as course grade's pool
            session_start = time.perf_counter() - started
            # the fork server imports torch and the rest while the seal opens: the first kernel waits for it
            server_ready = time.perf_counter() - started if pool._forkserver and pool._forkserver.wait_ready() else None
            description = pool.description
            for slug in slugs:
                zip_path = layout.autograder_zip(slug)
                if not zip_path.exists():
                    raise SystemExit(f"{zip_path} is missing: run `COURSE_SETTING=grading course build {slug}` first")
                zip_copy = private / zip_path.name
                zip_copy.write_bytes(zip_path.read_bytes())
                write_samples(layout, slug, tmp / slug, only=("complete.ipynb",))
                nb = nbformat.read(tmp / slug / "complete.ipynb", as_version=4)
                alone = nbclient_alone(nb, tmp / slug)
                first = sealed(pool, zip_copy, nbformat.writes(nb))
                seal = sealed(pool, zip_copy, nbformat.writes(nb))
                otter = otter_run(zip_copy, nb, tmp / slug / "otter", slug)
                figures[slug] = {"nbclient": alone, "sealed_first": first, "sealed": seal, "otter_run": otter,
                                 "sealed_over_otter": seal["total"] / otter, "sealed_over_nbclient": seal["total"] / alone["total"]}
                show(slug, figures[slug])
    return {"session_start": session_start, "server_ready": server_ready, "sandbox": description, "assignments": figures}


def show(slug: str, f: dict) -> None:
    a, s = f["nbclient"], f["sealed"]
    print(f"\n{slug}")
    print(f"  nbclient alone  {a['total']:6.1f} s = kernel start {a['kernel_start']:.1f} + first cell (imports) "
          f"{a['first_cell']:.1f} + other cells {a['other_cells']:.1f}; slowest cell {a['slowest_cell']:.1f} s "
          f"({a['slowest_cell_starts']!r})")
    print("  slowest cells:  " + "; ".join(f"{t:.1f} s {start[:30]!r}" for t, start in a["slowest_cells"]))
    for label, s in (("sealed, first", f["sealed_first"]), ("sealed, second", s)):
        print(f"  {label:15} {s['total']:6.1f} s = sandbox to cells done {s['sandbox_to_cells_done']:.1f} + tests "
              f"{s['tests']:.1f} + judge {s['judge']:.2f}")
    print(f"  otter run       {f['otter_run']:6.1f} s")
    print(f"  sealed (second) / otter run {f['sealed_over_otter']:.2f} (target 0.35 on kernel_attention, 0.5 elsewhere), "
          f"first of the assignment {f['sealed_first']['total'] / f['otter_run']:.2f}; "
          f"sealed / nbclient {f['sealed_over_nbclient']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="*", default=list(ASSIGNMENTS))
    parser.add_argument("--record", action="store_true", help=f"keep the figures in {RECORD.name}")
    parser.add_argument("--note", default="", help="how the machine was (quiet, loaded) for the record")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default=None,
                        help="the seal to grade with (default: course grade's, bubblewrap where it starts); "
                             "COURSE_WARM_KERNELS=0 times kernels started cold")
    args = parser.parse_args()
    layout = Layout.find(Path(__file__).resolve().parents[1])
    figures = measure(layout, args.slugs, args.sandbox)
    ready = figures["server_ready"]
    print(f"\nthe sandbox session's start (once per grading run): {figures['session_start']:.1f} s; its fork server "
          + (f"ready after {ready:.1f} s" if ready is not None else "not ready (off, died or too slow: kernels start cold)"))
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=layout.root, capture_output=True,
                                text=True).stdout.strip()
        RECORD.write_text(json.dumps({"date": datetime.date.today().isoformat(), "commit": commit, "note": args.note,
                                      "cores": os.cpu_count(), **figures}, indent=1) + "\n")
        print(f"recorded in {RECORD}")


if __name__ == "__main__":
    main()
