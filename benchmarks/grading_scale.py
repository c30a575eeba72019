"""Grade N generated kernel_attention submissions with ``course grade --jobs 2``, killing the
grader with SIGKILL midway and rerunning it: every submission must end with exactly one row.

Submissions are the course's sample submissions (``autograder.samples``: complete, half done,
blank, raising in its first answer) cycled, each with different bytes. Prints submissions per minute over both runs.

    .venv/bin/python benchmarks/grading_scale.py [N]
"""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.build.assign import build
from autograder.layout import Layout
from autograder.samples import write_samples

SLUG = "kernel_attention"


def main(count: int = 200) -> None:
    layout = Layout.find(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build(layout, SLUG, notebooks_dir=tmp / "notebooks", log=lambda *a: None)
        kinds = ("complete.ipynb", "partial.ipynb", "blank.ipynb", "raising.ipynb")
        write_samples(layout, SLUG, tmp / "samples", notebooks_dir=tmp / "notebooks", only=kinds)
        samples = [nbformat.read(tmp / "samples" / kind, as_version=4) for kind in kinds]
        subs = tmp / "submissions"
        subs.mkdir()
        for i in range(count):
            nb = samples[i % len(samples)]
            nb.metadata["student"] = i  # different bytes for every submission
            nbformat.write(nb, subs / f"student{i:03d}.ipynb")
        out = tmp / "results"
        command = [sys.executable, "-m", "autograder.cli", "grade", str(subs), "--out", str(out), "--jobs", "2"]

        started = time.perf_counter()
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while len(list((out / "rows").glob("*.json"))) < count // 2 and first.poll() is None:
            time.sleep(0.5)
        first.send_signal(signal.SIGKILL)
        first.wait()
        before = len(list((out / "rows").glob("*.json")))
        print(f"killed the grader (SIGKILL) after {time.perf_counter() - started:.0f} s with {before} rows saved")
        second = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if second.returncode != 0:
            raise SystemExit(second.stderr[-2000:])
        with open(out / "results.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        names = [r["submission"] for r in rows]
        statuses = {}
        for r in rows:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        print(f"rows: {len(rows)} for {count} submissions; distinct: {len(set(names))}; statuses: {statuses}")
        assert sorted(names) == sorted(p.name for p in subs.iterdir()), "a submission lost or doubled"
        print(f"{count} submissions in {wall / 60:.1f} min over both runs: {count / (wall / 60):.1f} submissions/minute")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
