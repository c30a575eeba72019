"""Do the seals hold ten times out of ten? The attacks on the seal, graded again and again on each path.

Several attacks race the grader (a chain that forks faster than a kill, a survivor waiting for the
next submission of its uid, a forged message on the grader's channel), so one green run proves
little. This grades the attacks of ``tests/support/seal_attacks.py``, with the repository's older
attacks that race it (``tests/support/adversarial.py``) and an honest complete notebook beside
them, ``--runs`` times on each path:

- ``bubblewrap``: ``course grade --sandbox bubblewrap``;
- ``posix``: ``course grade --sandbox posix`` (Gradescope's and Docker's seal) from a course folder
  only root can read;
- ``gradescope``: the autograder zip run as Gradescope runs it (``course gradescope-check``), two at
  once, with the control groups this host allows;
- ``gradescope-alone``: the same one at a time with no control group (``COURSE_CGROUP=off``), as in
  Gradescope's own containers, where what no /proc reading shows is counted as the memory the
  machine lost while the run went on.

After every run it looks for what an attack that got through leaves: a process, file or IPC object
of a sandbox uid, the canary a planted link would make root write, a copied notebook. It prints,
per attack and path, how many runs held, and the seconds a run took. Needs root (POSIX separation).

    .venv/bin/python benchmarks/seal_attacks.py [--runs 10] [--paths bubblewrap,posix,gradescope,gradescope-alone] [--timeout 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
# the attacks, variants and batch helpers are the tests' own (the tests package, from the top of the repository)
sys.path.insert(0, str(REPO))

from tests.support.adversarial import make_attacks, with_attack  # noqa: E402
from tests.support.seal_attacks import row_problems, seal_attacks, traces  # noqa: E402

from autograder.grade.grader import Grader, Limits  # noqa: E402
from autograder.layout import Layout  # noqa: E402
from autograder.samples import write_samples  # noqa: E402

SLUG = "kernel_attention"
#: The older attacks that race the grader (the others are graded every run of the suite).
RACING = ("forges_result_messages_and_values", "kills_the_grader", "memory_split_over_children",
          "bounded_process_flood", "spins_in_c_with_setsid_children")
#: --timeout raises the wall-time limit: on a loaded machine an attack that fills memory (and must be
#: stopped for memory) can otherwise reach the time limit first.
LIMITS = Limits(timeout=40, memory_mb=3072)


def attack_list(course: Path) -> list[dict]:
    older = make_attacks({"repo": course, "autograder_zip": Path("zip"), "submissions": Path("s"),
                          "results": Path("r"), "host_marker": Path("/nonexistent/marker"), "port": 9})
    return seal_attacks() + [a for a in older if a["name"] in RACING]


def prepare(tmp: Path, only: set[str] = frozenset()) -> tuple[Path, Path, list[dict]]:
    """A private course folder with the built zip, and the submissions: attacks and the complete sample."""
    layout = Layout.find(REPO)
    zip_path = layout.autograder_zip(SLUG)
    if not zip_path.is_file():
        raise SystemExit(f"build first: course build {SLUG}")
    course = tmp / "course"
    (course / "out" / "autograders").mkdir(parents=True)
    (course / "solutions").mkdir()
    (course / "helpers").mkdir()
    shutil.copy(zip_path, course / "out" / "autograders")
    write_samples(layout, SLUG, tmp / "samples")
    subs = tmp / "submissions"
    subs.mkdir()
    shutil.copy(tmp / "samples" / "complete.ipynb", subs / "complete.ipynb")
    blank = nbformat.read(tmp / "samples" / "blank.ipynb", as_version=4)
    attacks = [a for a in attack_list(course) if not only or a["name"] in only]
    for attack in attacks:
        nbformat.write(with_attack(blank, attack["cell"]), subs / f"{attack['name']}.ipynb")
    return course, subs, attacks


def grade_locally(course: Path, subs: Path, out: Path, mode: str) -> dict[str, tuple[dict, str]]:
    rows = Grader(Layout(course), subs, out, LIMITS, jobs=2, sandbox_mode=mode, force=True).run(log=lambda *a: None)
    return {Path(r["file"]).stem: (r, (out / "feedback" / f"{r['submission']}.txt").read_text()) for r in rows}


def grade_on_gradescope(course: Path, subs: Path, out: Path, skip: set[str], alone: bool = False) -> dict[str, tuple[dict, str]]:
    """As Gradescope runs the zip; ``skip``: attacks that wait for the time limit (300 s there);
    ``alone``: one at a time with no control group, as in Gradescope's containers."""
    from autograder.platforms.gradescope import emulate

    zip_path = next((course / "out" / "autograders").glob("*.zip"))

    def one(path: Path):
        result = emulate(zip_path, path, env={"COURSE_CGROUP": "off"} if alone else None)
        status = result["tests"][0]["output"].split("Status: ", 1)[-1].split(".", 1)[0]
        text = json.dumps(result)
        message = result["tests"][0]["output"]
        return path.stem, ({"status": status, "total": result["score"], "message": message}, text)

    with ThreadPoolExecutor(1 if alone else 2) as pool:
        return dict(pool.map(one, [p for p in sorted(subs.glob("*.ipynb")) if p.stem not in skip]))


def main() -> int:
    global LIMITS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--paths", default="bubblewrap,posix,gradescope,gradescope-alone")
    parser.add_argument("--timeout", type=float, default=LIMITS.timeout, help="seconds a submission may run")
    parser.add_argument("--only", default="", help="comma-separated attack names (default: all); the complete "
                                                  "notebook is always graded beside them")
    args = parser.parse_args()
    LIMITS = dataclasses.replace(LIMITS, timeout=args.timeout)
    if os.geteuid() != 0:
        raise SystemExit("needs root: POSIX separation runs each submission as another uid")
    paths = args.paths.split(",")
    os.environ["COURSE_SETTING"] = "grading"
    with tempfile.TemporaryDirectory(prefix="seal-attacks-") as tmp:
        tmp = Path(tmp)  # 0700: the seal refuses a course folder others could read
        course, subs, attacks = prepare(tmp, set(filter(None, args.only.split(","))))
        held = {(a["name"], p): 0 for a in attacks for p in paths}
        ran = dict(held)
        failures: list[str] = []
        seconds = {p: [] for p in paths}
        for run in range(args.runs):
            for path in paths:
                started = time.perf_counter()
                out = tmp / f"results-{path}-{run}"
                slow = {a["name"] for a in attacks if a["expect"] == ("timeout",)}
                rows = grade_on_gradescope(course, subs, out, slow, alone=path == "gradescope-alone") \
                    if path.startswith("gradescope") else grade_locally(course, subs, out, path)
                seconds[path].append(time.perf_counter() - started)
                left = traces()
                honest, _ = rows["complete"]
                if honest["status"] != "ok" or honest["total"] != 22:
                    failures.append(f"run {run + 1} {path}: the complete notebook scored {honest['total']} "
                                    f"({honest['status']}: {honest['message'][:200]})")
                for attack in attacks:
                    if attack["name"] not in rows:
                        continue  # not run on this path (see grade_on_gradescope)
                    ran[(attack["name"], path)] += 1
                    row, text = rows[attack["name"]]
                    problems = row_problems(attack, row, text) + left
                    if problems:
                        failures.append(f"run {run + 1} {path} {attack['name']}: {'; '.join(problems)[:400]}")
                    else:
                        held[(attack["name"], path)] += 1
                print(f"run {run + 1}/{args.runs} {path}: {seconds[path][-1]:.0f} s, "
                      f"{sum(held[(a['name'], path)] for a in attacks)}/{sum(ran[(a['name'], path)] for a in attacks)} held so far"
                      + (f", left behind: {left[:3]}" if left else ""), flush=True)
        width = max(len(a["name"]) for a in attacks)
        print(f"\n{'attack':<{width}}  " + "  ".join(f"{p:>10}" for p in paths))
        for attack in attacks:
            print(f"{attack['name']:<{width}}  " + "  ".join(
                f"{held[(attack['name'], p)]:>7}/{ran[(attack['name'], p)]:<2}" if ran[(attack['name'], p)] else f"{'-':>10}"
                for p in paths))
        print("seconds a run: " + ", ".join(f"{p} {sum(s) / len(s):.0f}" for p, s in seconds.items()))
        for failure in failures:
            print("FAILED", failure)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
