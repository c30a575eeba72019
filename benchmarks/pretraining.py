"""pretraining targets: the solved notebook at the full setting (three GPTs: no pretraining,
pretraining, the synthesizer with pretraining) in at most 15 minutes on this CPU, with pretraining
at least three times the no-pretraining accuracy on held-out people; the notebook at the fast
setting in at most 90 s.

    .venv/bin/python benchmarks/pretraining.py          # about 15 minutes
    .venv/bin/python benchmarks/pretraining.py --fast   # the fast setting only

The figures are read from what the notebook prints, so they are what a student sees.
"""

from __future__ import annotations

import argparse
import re

import nbformat

from reference import run_solved_notebook

SLUG = "pretraining"
MODELS = ("most common place", "no pretraining", "pretraining + finetuning", "synthesizer: pretraining + finetuning")


def printed(nb) -> str:
    return "\n".join(output.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                     for output in cell.get("outputs", []) if output.get("output_type") == "stream")


def accuracies(text: str) -> dict[str, float]:
    """The last percentage printed for each model (the final table)."""
    found = {}
    for model in MODELS:
        values = re.findall(rf"^ *{re.escape(model)}: +([\d.]+)%", text, flags=re.M)
        if not values:
            raise SystemExit(f"the notebook printed no accuracy for {model!r}:\n{text[-3000:]}")
        found[model] = float(values[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="only the fast setting's run")
    parser.add_argument("--save", metavar="PATH", help="also write the executed full-setting notebook here, to look at")
    args = parser.parse_args()
    if not args.fast:
        seconds, nb = run_solved_notebook(SLUG, "full")
        if args.save:
            nbformat.write(nb, args.save)
        text = printed(nb)
        found = accuracies(text)
        for model, value in found.items():
            print(f"{model:>38}: {value:5.1f}% exact match on held-out people")
        ratio = found["pretraining + finetuning"] / max(found["no pretraining"], 1e-9)
        print(f"pretraining / no pretraining: {ratio:.1f}x (target >= 3x)")
        times = re.search(r"pretraining time: self-attention (\d+) s, synthesizer (\d+) s", text)
        if times:
            print(f"pretraining: self-attention {times[1]} s, synthesizer {times[2]} s")
        print(f"notebook top to bottom, full setting: {seconds / 60:.1f} min (target <= 15 min)")
    seconds, _ = run_solved_notebook(SLUG, "grading")
    print(f"notebook top to bottom, fast setting: {seconds:.1f} s (target <= 90 s)")


if __name__ == "__main__":
    main()
