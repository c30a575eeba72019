"""Does a written question's evidence show in every run? (issue 36, part 3)

A reference answer is only fair if the figure or number it rests on says the same thing whatever
the run. A notebook fixes every seed itself (model weights, batch order, sampling), so its runs
differ only by the machine and the threads; this runs the solved notebook in the quick setting (the
one a slow laptop uses) with those seeds as shipped (seed 0) and moved by 1000, 2000, ... (seeds 1-4:
every ``seed_everything(n)``, ``manual_seed(n)`` and ``seed=n`` of its code, and the calls that take a
default seed), each with 1 and 2 torch threads (a laptop's other programs decide how many a student
gets). It then reads, in the same kernel, the numbers each written question is answered from, and
prints how often the claim the reference answer makes held. The figures are kept in
``benchmarks/evidence.json``; ``--report`` prints them again.

    benchmarks/evidence.py summarization pretraining [--seeds 0-4] [--threads 1,2] [--report]

Each notebook's questions are in ``QUESTIONS``: the code that reads their evidence (run after the
notebook's cells, the result a dict of JSON values) and the claims, each a test on that dict.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.reference import REPO, run_solved_notebook  # noqa: E402

FIGURES = REPO / "benchmarks" / "evidence.json"
MARK = "EVIDENCE "


@dataclass(frozen=True)
class Claim:
    question: str  # as the notebook numbers it
    says: str  # what the reference answer claims, in a few words
    holds: object  # (evidence dict) -> bool


# --------------------------------------------------------------------------------------- summarization
SUMMARIZATION_READ = r'''
from helpers.summarization import copied_facts, facts_of

import re as _re

def _copying(unseen):
    """Of the reference summaries' names and numbers, the share the model's summary has too (its words are lower-case)."""
    pairs = [(a, s) for a, s in zip(test_articles, greedy_summaries) if a.unseen == unseen]
    facts = [(facts_of(a.summary), set(_re.findall(r"[a-z]+|\d+", s.lower()))) for a, s in pairs]
    return {"articles": len(pairs),
            "names_copied": sum(len(r[0] & w) for r, w in facts) / max(sum(len(r[0]) for r, _ in facts), 1),
            "numbers_copied": sum(len(r[1] & w) for r, w in facts) / max(sum(len(r[1]) for r, _ in facts), 1),
            "exact": sum(same_words(s, a.summary) for a, s in pairs) / max(len(pairs), 1)}

EVIDENCE = {
    "q12_candidates": len(candidates),
    "q12_candidates_looking_at_their_place": sum(looks_at_its_place),
    "q12_story": article.story,
    "q12_written_exactly": same_words(vocab.decode(written_tokens[0]), article.summary),
    "q12_copied": copied_facts(weights, summary_pieces, source_pieces, article.summary),
    "seen": _copying(False),
    "unseen": _copying(True),
    "rougeL": {system: {subset: round(scores["rougeL"], 3) for subset, scores in table.items()} for system, table in tables.items()},
}
'''


def _q12_names_and_numbers_peak(e: dict) -> bool:
    copied = e["q12_copied"]
    return (any(r["number"] for r in copied) and any(not r["number"] for r in copied)
            and all(r["peak_on_its_place"] for r in copied))


SUMMARIZATION = [
    Claim("Q12", "the map's summary copies a name and a number, each peaking on its place in the article",
          _q12_names_and_numbers_peak),
    Claim("Q12", "far from all word-for-word candidates (under three quarters) have every copied fact peak on its place",
          lambda e: e["q12_candidates_looking_at_their_place"] < 3 * e["q12_candidates"] / 4),
    Claim("intro", "the quick model writes most names it saw in training (over 60%)", lambda e: e["seen"]["names_copied"] > 0.6),
    Claim("intro", "... and few it never saw (under 30%)", lambda e: e["unseen"]["names_copied"] < 0.3),
    Claim("intro", "the quick model beats the lead baseline's ROUGE-L, seen names",
          lambda e: e["rougeL"]["greedy"]["seen names"] > e["rougeL"]["lead sentence"]["seen names"]),
    Claim("intro", "... and on unseen names",
          lambda e: e["rougeL"]["greedy"]["unseen names"] > e["rougeL"]["lead sentence"]["unseen names"]),
]


def _before_the_performer(cells):
    """Everything up to Part 12 (the optional Performer, which no written question of Parts 1-11 reads)."""
    end = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "## Part 12" in c.source)
    return cells[:end]


# --------------------------------------------------------------------------------------- pretraining
PRETRAINING_READ = r'''
EVIDENCE = {
    "heldout_people": len(heldout_people),
    "accuracy": {name: round(float(acc), 4) for name, acc in results.items()},
    "pretrain_loss_last": {"self-attention": round(float(pretrain_log.losses[-1]), 4),
                           "synthesizer": round(float(synthesizer_pretrain_log.losses[-1]), 4)},
    "pretrain_seconds": {"self-attention": round(pretrain_log.seconds, 1), "synthesizer": round(synthesizer_pretrain_log.seconds, 1)},
}
'''


def _accuracy(e: dict, start: str) -> float:
    return next(v for k, v in e["accuracy"].items() if k.startswith(start))


PRETRAINING = [
    Claim("Q8", "pretraining then finetuning gets more held-out people right than no pretraining and than the most common place",
          lambda e: _accuracy(e, "pretraining + finetuning") > max(_accuracy(e, "no pretraining"), _accuracy(e, "most common"))),
    Claim("Q8", "the synthesizer gets fewer people right than self-attention more often than not (counted over the runs)",
          lambda e: _accuracy(e, "synthesizer") < _accuracy(e, "pretraining + finetuning")),
    Claim("Q8", "the two are at most five people apart: one run cannot rank them",
          lambda e: abs(_accuracy(e, "synthesizer") - _accuracy(e, "pretraining + finetuning")) * e["heldout_people"] <= 5.01),
    Claim("Q8", "their pretraining losses end within 3% of each other",
          lambda e: abs(e["pretrain_loss_last"]["synthesizer"] / e["pretrain_loss_last"]["self-attention"] - 1) < 0.03),
]


# --------------------------------------------------------------------------------------- attention_foundations
ATTENTION_FOUNDATIONS_READ = r"""
from helpers.attention_foundations import UPPER, greedy_decode, make_batch

_text = "I am a stuDent of deep Nets"  # the sentence of the alignment plot
_ids, _weights = greedy_decode(models["attention"], make_batch([(UPPER, _text, _text.upper())]))
_rows = _weights[0, :len(_text)]  # (characters, source): output character t, source position 0 is the task token
_next = torch.arange(len(_text)) + 1
EVIDENCE = {
    "accuracy": {name: {str(length): round(float(share), 3) for length, share in scores.items()} for name, scores in accuracy.items()},
    "alignment_written": VOCAB.decode(_ids[0]),
    "alignment_rows_peaking_on_t_plus_1": int((_rows.argmax(-1) == _next).sum()),
    "alignment_rows": len(_text),
    "alignment_weight_on_t_plus_1": [round(float(w), 3) for w in _rows[torch.arange(len(_text)), _next]],
}
"""


def _median(values: list) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


ATTENTION_FOUNDATIONS = [
    Claim("Q3c", "the bottleneck model gets some 5-character sentences right (over 10%) and falls with length",
          lambda e: e["accuracy"]["bottleneck"]["5"] > 0.1 and e["accuracy"]["bottleneck"]["5"] > e["accuracy"]["bottleneck"]["10"]),
    Claim("Q3c", "... and none or almost none (at most 2%) from 15 characters on",
          lambda e: max(v for k, v in e["accuracy"]["bottleneck"].items() if int(k) >= 15) <= 0.02),
    Claim("Q3c", "the attention model stays at 85% or more at every length up to 30 (the answer gives 87-100%)",
          lambda e: min(e["accuracy"]["attention"].values()) >= 0.85),
    Claim("Q3d", "in the alignment plot every output character but at most two peaks on source position t + 1",
          lambda e: e["alignment_rows_peaking_on_t_plus_1"] >= e["alignment_rows"] - 2),
    Claim("Q3d", "the weight on that position is mostly 0.4 to 0.8 (median in that range)",
          lambda e: 0.4 <= _median(e["alignment_weight_on_t_plus_1"]) <= 0.8),
]


# --------------------------------------------------------------------------------------- autoencoders
AUTOENCODERS_READ = r"""
def _mean(dataset, kind, variant, k):
    shares = grid.accuracies(dataset, kind, variant).get(k)
    return None if shares is None else round(sum(shares) / len(shares), 4)

EVIDENCE = {
    "probe": {f"{d} {kind} {variant} {k}": _mean(d, kind, variant, k) for d in ("synthetic", "MNIST")
              for kind in ("linear", "nonlinear") for variant in ("vanilla", "denoising", "masked") for k in ks},
    "raw": {d: round(grid.baselines[d]["raw"], 4) for d in ("synthetic", "MNIST")},
    "pca": {d: {str(k): round(v, 4) for k, v in grid.baselines[d]["pca"].items()} for d in ("synthetic", "MNIST")},
    "smallest_cosine_k10": round(float(cosines.min()), 6),  # the cell's last k
}
"""


def _probe(e: dict, dataset: str, kind: str, variant: str, k: int) -> float:
    return e["probe"][f"{dataset} {kind} {variant} {k}"]


AUTOENCODERS = [
    Claim("Q5", "synthetic: every autoencoder gains from k = 5 to k = 100",
          lambda e: all(_probe(e, "synthetic", kind, v, 5) < _probe(e, "synthetic", kind, v, 100)
                        for kind in ("linear", "nonlinear") for v in ("vanilla", "denoising", "masked"))),
    Claim("Q5", "synthetic: at k = 100 every autoencoder is within 4 points of the raw input",
          lambda e: all(abs(_probe(e, "synthetic", kind, v, 100) - e["raw"]["synthetic"]) <= 0.04
                        for kind in ("linear", "nonlinear") for v in ("vanilla", "denoising", "masked"))),
    Claim("Q5", "MNIST: at k = 5 every ReLU autoencoder beats PCA",
          lambda e: all(_probe(e, "MNIST", "nonlinear", v, 5) > e["pca"]["MNIST"]["5"] for v in ("vanilla", "denoising", "masked"))),
    Claim("Q5", "MNIST: at k = 100 the denoising ReLU autoencoder beats the vanilla one and the raw pixels",
          lambda e: _probe(e, "MNIST", "nonlinear", "denoising", 100) > max(_probe(e, "MNIST", "nonlinear", "vanilla", 100), e["raw"]["MNIST"])),
    Claim("Q6b", "the converged linear autoencoder's smallest cosine is above 0.99 (k = 10)",
          lambda e: e["smallest_cosine_k10"] > 0.99),
    Claim("Q6b", "MNIST: the grid's linear autoencoders are within 3 points of PCA at k = 5 and 10",
          lambda e: all(abs(_probe(e, "MNIST", "linear", v, k) - e["pca"]["MNIST"][str(k)]) <= 0.03
                        for v in ("vanilla", "denoising", "masked") for k in (5, 10))),
]


@dataclass(frozen=True)
class Notebook:
    read: str  # code run in the kernel after the notebook's cells; it binds EVIDENCE
    claims: list
    cells: object = None  # (cells) -> the cells to run
    # calls that take a default seed, each given the run's: (the text in the notebook, the same with {seed})
    default_seeds: tuple = ()


QUESTIONS = {
    "attention_foundations": Notebook(ATTENTION_FOUNDATIONS_READ, ATTENTION_FOUNDATIONS,
                                      default_seeds=(("lr=lr, name=name)", "lr=lr, name=name, seed={seed})"),)),
    "autoencoders": Notebook(AUTOENCODERS_READ, AUTOENCODERS,
                             default_seeds=(("quick=[0], grading=[0])", "quick=[{seed}], grading=[0])"),
                                            ('run["seed"] == 0', 'run["seed"] == {seed}'))),  # the model kept for reconstructions
    "summarization": Notebook(SUMMARIZATION_READ, SUMMARIZATION, _before_the_performer,
                              default_seeds=(("sequence_loss, **schedule)", "sequence_loss, **schedule, seed={seed})"),)),
    "pretraining": Notebook(PRETRAINING_READ, PRETRAINING,
                            default_seeds=(("**MODEL_SIZE)", "**MODEL_SIZE, seed={seed})"),)),
}

#: Every seed a notebook's own code fixes, each moved by the run's seed (seed 0: the notebook as shipped).
SEED_LITERALS = re.compile(r"\b(seed_everything\(|manual_seed\(|seed=)(\d+)\b")


def reseeded(source: str, seed: int, notebook: Notebook) -> str:
    """A code cell with every fixed seed moved by ``seed``: a notebook seeds everything itself (model
    weights, batch order, sampling), so another run of it is another set of those seeds."""
    if not seed:
        return source
    source = SEED_LITERALS.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + 1000 * seed}", source)
    for call, with_seed in notebook.default_seeds:
        source = source.replace(call, with_seed.format(seed=1000 * seed))
    return source


def _with(seed: int, threads: int, notebook: Notebook):
    """An ``edit`` for run_solved_notebook: the seed and threads in the first code cell, the evidence read last."""
    import nbformat

    def edit(cells):
        cells = notebook.cells(cells) if notebook.cells else cells
        first = next((c for c in cells if c.cell_type == "code" and "seed_everything(" in c.source), None)
        if first is None:
            raise ValueError("no code cell calls seed_everything: no first cell to set the threads in")
        for cell in cells:
            if cell.cell_type == "code" and "BEGIN TEST CONFIG" not in cell.source:  # tests keep their inputs
                cell.source = reseeded(cell.source, seed, notebook)
        first.source += f"\ntorch.set_num_threads({threads})"
        read = notebook.read + f"\nimport json as _json\nprint({MARK!r} + _json.dumps(EVIDENCE))"
        return [*cells, nbformat.v4.new_code_cell(read)]

    return edit


def gather(slug: str, seed: int, threads: int) -> dict:
    notebook = QUESTIONS[slug]
    seconds, nb = run_solved_notebook(slug, "quick", edit=_with(seed, threads, notebook))
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    evidence = json.loads(text.split(MARK, 1)[1].splitlines()[0])
    evidence["notebook_seconds"] = round(seconds, 1)
    return evidence


def judged(slug: str, runs: dict) -> list[tuple[Claim, dict[str, bool]]]:
    """Each claim of ``slug`` with whether it held in each run on record (judged now: a claim may be
    restated; a run recorded before a claim's evidence was read is left out of that claim)."""
    found = []
    for claim in QUESTIONS[slug].claims:
        held = {}
        for name, run in runs.items():
            try:
                held[name] = bool(claim.holds(run))
            except KeyError:
                pass
        found.append((claim, held))
    return found


def report(slug: str, runs: dict) -> None:
    """How often each claim held over the runs on record."""
    print(f"\n{slug}: how often each claim held ({len(runs)} runs on record)")
    for claim, held in judged(slug, runs):
        failed = sorted(name for name, ok in held.items() if not ok)
        print(f"  {claim.question:>6} {len(held) - len(failed)}/{len(held)}  {claim.says}"
              + (f"  (not in: {'; '.join(failed)})" if failed else ""))


def _record(slug: str, run: str, evidence: dict) -> dict:
    """Add one run to evidence.json, under a lock: two benchmarks (one thread each) may run at once."""
    import fcntl

    with open(FIGURES.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        figures = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
        figures.setdefault(slug, {})[run] = evidence
        FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return figures


def _numbers(text: str) -> list[int]:
    if "-" in text:
        low, high = map(int, text.split("-"))
        return list(range(low, high + 1))
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="+", choices=sorted(QUESTIONS))
    parser.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,3")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--report", action="store_true", help="only print how often each claim held in the runs on record")
    args = parser.parse_args()
    figures = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    for slug in args.slugs:
        if not args.report:
            for threads in _numbers(args.threads):
                for seed in _numbers(args.seeds):
                    print(f"{slug}: seed {seed}, {threads} thread(s) ...", flush=True)
                    evidence = gather(slug, seed, threads)
                    figures = _record(slug, f"seed {seed}, {threads} thread(s)", {**evidence, "measured": dt.date.today().isoformat()})
                    print(json.dumps(evidence), flush=True)
        report(slug, figures.get(slug, {}))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # threads fixed as each run asks: a notebook kernel would follow the load
    main()
