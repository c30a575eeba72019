"""pretraining targets: the solved notebook at the full setting (three GPTs: no pretraining,
pretraining, the synthesizer with pretraining) in at most 15 minutes on this CPU, with pretraining
at least three times the no-pretraining accuracy on held-out people; at the quick setting, at most
3 minutes of training with pretraining still clearly ahead of no pretraining and of the baseline;
the notebook at the grading setting in at most 90 s.

    .venv/bin/python benchmarks/pretraining.py             # all three settings, about 20 minutes
    .venv/bin/python benchmarks/pretraining.py --quick     # the quick setting only, about 3 minutes
    .venv/bin/python benchmarks/pretraining.py --grading   # the grading setting only (--fast: the old name)

The figures are read from what the notebook prints, so they are what a student sees.
"""

from __future__ import annotations

import argparse
import re

import nbformat

from busy import compare_when_asked
from reference import run_solved_notebook

SLUG = "pretraining"
MODELS = ("most common place", "no pretraining", "pretraining + finetuning", "synthesizer: pretraining + finetuning")


def printed(nb) -> str:
    return "\n".join(output.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                     for output in cell.get("outputs", []) if output.get("output_type") == "stream")


def shown(nb) -> str:
    """Every printed and displayed text: the progress bars leave "training NAME: N steps in S s"."""
    texts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            texts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(texts)


def accuracies(text: str) -> dict[str, float]:
    """The last percentage printed for each model (the final table)."""
    found = {}
    for model in MODELS:
        values = re.findall(rf"^ *{re.escape(model)}: +([\d.]+)%", text, flags=re.M)
        if not values:
            raise SystemExit(f"the notebook printed no accuracy for {model!r}:\n{text[-3000:]}")
        found[model] = float(values[-1])
    return found


def report(name: str, seconds: float, nb, target_minutes: float) -> None:
    """The accuracies and times the notebook printed in one setting."""
    text = printed(nb)
    found = accuracies(text)
    people = re.search(r"evaluating on (\d+) others", text)
    for model, value in found.items():
        print(f"{model:>38}: {value:5.1f}% exact match on {people[1] if people else '?'} held-out people")
    if found["no pretraining"] > 0:
        ratio = found["pretraining + finetuning"] / found["no pretraining"]
        print(f"pretraining / no pretraining: {ratio:.1f}x" + (" (target >= 3x)" if name == "full" else ""))
    else:
        print(f"pretraining / no pretraining: {found['pretraining + finetuning']:.1f}% against 0%")
    times = re.findall(r"training \w[\w :+]*?: (\d+) steps in ([\d.]+) s", shown(nb))
    total = sum(float(t) for _, t in times)
    pretraining = re.search(r"pretraining time: self-attention (\d+) s, synthesizer (\d+) s", text)
    if pretraining:
        print(f"pretraining: self-attention {pretraining[1]} s, synthesizer {pretraining[2]} s")
    if times:
        print(f"training, all runs ({len(times)}): {total / 60:.1f} min")
    print(f"notebook top to bottom, {name} setting: {seconds / 60:.1f} min (target <= {target_minutes:g} min"
          + (" of training)" if name == "quick" else ")"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the quick setting's run")
    parser.add_argument("--grading", "--fast", action="store_true", help="only the grading setting's run")
    parser.add_argument("--save", metavar="PATH", help="also write the executed full-setting notebook here, to look at")
    args = parser.parse_args()
    everything = not (args.quick or args.grading)
    if everything:
        seconds, nb = run_solved_notebook(SLUG, "full")
        if args.save:
            nbformat.write(nb, args.save)
        report("full", seconds, nb, 15)
    if everything or args.quick:
        seconds, nb = run_solved_notebook(SLUG, "quick")
        report("quick", seconds, nb, 3)
    if everything or args.grading:
        seconds, _ = run_solved_notebook(SLUG, "grading")
        print(f"notebook top to bottom, grading setting: {seconds:.1f} s (target <= 90 s)")


if __name__ == "__main__":
    if not compare_when_asked(SLUG):  # --quick --busy: idle and beside a busy program (benchmarks/busy.py)
        main()
