"""How long ``course report`` takes for N submissions of one assignment (the target: 2,000 in at
most 20 s on 2 cores), and that it still finds what it must at that size.

The batch is made, not graded: N kernel_attention notebooks, each the solved student notebook with a
random choice of the known-correct and known-wrong variants of
``tests/kernel_attention_variants.py`` and a few lines of its own (so that no two
students' code is the same), their grading rows as ``course grade`` writes them (a failure for each
test a chosen wrong variant must lose, with numbers that differ per student; a few timeouts, raising
cells and unreadable files), feedback files, ``run.json``, one hidden test broken for everybody, and
one disguised copy (renamed variables, reordered functions). Prints the time of ``course report`` as
a command (Python's start and imports included) and whether the broken test and the copy come first.

    .venv/bin/python benchmarks/report_scale.py [N [FOLDER]]   # FOLDER: keep the batch and its report there
"""

from __future__ import annotations

import copy
import os
import random
import resource
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
# the attacks, variants and batch helpers are the tests' own (the tests package, from the top of the repository)
sys.path.insert(0, str(REPO))

from tests.kernel_attention_variants import CORRECT, WRONG  # noqa: E402
from tests.support.notebook_edits import edited_functions  # noqa: E402
from tests.support.report_batches import (disguised_copy, master_tests, mistake, solved, synthetic_row, template,  # noqa: E402
                            with_variant, write_results)

SLUG = "kernel_attention"


#: Statements a student might add of their own (checks, notes); numbers make each one theirs.
OWN = ("check = torch.linspace(0, {a:.4f}, {n}).mean() * {b:.5f}  # my own check",
       "tolerance_{n} = max({a:.5f}, {b:.4f} ** {n})",
       "print('sanity', round({a:.4f} * {n}, 3), {b:.5f} > 0.5)",
       "scale_guess = [{a:.3f} * i for i in range({n})][-1] + {b:.4f}")


def own_lines(nb, rng: random.Random):
    """Four to eight statements of the student's own at the top of solution cells: code no one
    else has, as every real student's code is mostly their own."""
    nb = copy.deepcopy(nb)
    given = {c.source for c in template(SLUG).cells if c.cell_type == "code"}
    written = [c for c in nb.cells if c.cell_type == "code" and c.source not in given]
    for _ in range(rng.randrange(4, 9)):
        cell = rng.choice(written)
        line = rng.choice(OWN).format(a=rng.random(), b=rng.random(), n=rng.randrange(2, 99))
        cell.source = line + "\n" + cell.source
    return nb


def make_batch(folder: Path, count: int, seed: int = 0) -> tuple[str, tuple[str, str]]:
    """Write N submissions and their results under ``folder``; returns the broken test and the copy pair."""
    rng = random.Random(seed)
    tests = master_tests(SLUG)
    hidden = [case["test"] for cases in tests.values() for case in cases if case["hidden"] and case["points"]]
    broken = hidden[len(hidden) // 2]
    base = solved(SLUG)
    submissions, rows = folder / "submissions", []
    submissions.mkdir(parents=True)
    for i in range(count):
        name = f"student_{i:04d}.ipynb"
        chosen, used = [], set()
        for variant in rng.sample(CORRECT + WRONG, rng.randrange(0, 4)):
            if not set(edited_functions(variant)) & used:
                chosen.append(variant)
                used |= set(edited_functions(variant))
        nb = base
        for variant in chosen:
            nb = with_variant(nb, variant)
        nb = own_lines(nb, rng)
        status, message = "ok", ""
        draw = rng.random()
        failed = {broken: mistake(broken, rng)}
        for variant in chosen:
            for test in variant.get("must_lose", []) + variant.get("must_fail_public", []):
                failed[test] = mistake(test, rng)
        if draw < 0.02:
            status, message = "timeout", "did not finish within 300 s (an endless loop or a very slow cell?)"
            failed = {case["test"]: "did not run (the grading stopped before it)" for c in tests.values() for case in c}
        elif draw < 0.05:
            status = "error"
            message = f"the cell starting 'X_{rng.randrange(3)} = torch.randn(8, 6)' raised NameError: name 'q' is not defined"
        if draw > 0.995:
            (submissions / name).write_text("{ not a notebook", encoding="utf-8")
            rows.append({**synthetic_row(name, {}, {}, "", "invalid", "not a readable Jupyter notebook"),
                         "assignment": "", "scores": {}, "total": 0, "possible": 0})
            continue
        nbformat.write(nb, submissions / name)
        rows.append(synthetic_row(name, tests, failed, SLUG, status, message))
    original = rows[7]["submission"]
    copy = nbformat.read(submissions / original, as_version=4)
    nbformat.write(disguised_copy(copy, template(SLUG)), submissions / "zz_copy.ipynb")
    rows.append({**rows[7], "submission": "zz_copy.ipynb", "file": "zz_copy.ipynb"})
    write_results(folder / "results", rows, submissions)
    return broken, (original, "zz_copy.ipynb")


def main(count: int = 2000, keep: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(keep or tmp)
        started = time.perf_counter()
        broken, pair = make_batch(folder, count)
        print(f"made {count} submissions and their results in {time.perf_counter() - started:.0f} s")
        started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([str(REPO / ".venv" / "bin" / "course"), "report", str(folder / "results")],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_seconds = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        if done.returncode:
            sys.exit(f"course report failed:\n{done.stderr[-3000:]}")
        page = (folder / "results" / "report.html").read_text(encoding="utf-8")
        tests = page[page.index('id="tests"'):page.index('id="mistakes"')]
        first_flagged = re.search(r'<tr class=flagged><td><code>(.*?)</code>', tests)
        similar = page[page.index('id="similar"'):]
        first_pair = re.findall(r"<tr><td class=num>1</td><td>.*?</tr>", similar)
        print(f"course report, {count + 1} submissions of {SLUG}: {seconds:.1f} s (target 20 s on 2 cores; "
              f"{cpu_seconds:.1f} s of CPU, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores), "
              f"page {len(page) >> 10} KiB")
        flagged = first_flagged and first_flagged.group(1).replace("<wbr>", "")
        print(f"first flagged test: {flagged} ({'the broken one' if flagged == broken else 'NOT the broken ' + broken})")
        found = bool(first_pair) and all(name in first_pair[0] for name in pair)
        print(f"first similar pair: {'the copy' if found else 'NOT the copy'} ({pair[0]} and {pair[1]})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, sys.argv[2] if len(sys.argv) > 2 else None)
