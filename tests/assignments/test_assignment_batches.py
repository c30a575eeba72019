"""The same end-to-end checks for every assignment graded in its own batch (``assignment_batch``):
the committed student notebook matches a fresh build, every submission gets its row (and every
status but ok its reason), the reference and a student's real export score full marks, a blank
notebook scores nothing, each known-wrong variant loses the points it must (and keeps those it
must keep) and fails its public check, each correct alternative keeps them.

``kernel_attention``'s batch also holds the attacks on the grader and the samples that test the
grader itself; ``test_kernel_attention_grading`` checks what is particular to them.
"""

import importlib

import pytest

from autograder.build.check import _tree_differences

from tests.support.batches import failures, variant_notebook

AUTOGRADED_POINTS = {"kernel_attention": 22, "karate_gnn": 15, "autoencoders": 14, "visualizing_attention": 14, "summarization": 43,
                     "attention_foundations": 15, "pretraining": 12}


def variants(kind: str) -> list:
    """(slug, variant) for every WRONG or CORRECT variant of every batched assignment."""
    return [(slug, v) for slug in AUTOGRADED_POINTS for v in getattr(importlib.import_module(f"tests.{slug}_variants"), kind)]


@pytest.mark.parametrize("slug", AUTOGRADED_POINTS)
def test_committed_student_notebook_matches_a_fresh_build(layout, assignment_batch, slug):
    differences = list(_tree_differences(assignment_batch(slug).notebooks / slug, layout.student_dir(slug)))
    assert differences == [], "notebooks/ is stale: run `course build` and commit"


@pytest.mark.parametrize("slug", AUTOGRADED_POINTS)
def test_every_submission_gets_its_row_and_status(assignment_batch, slug):
    batch = assignment_batch(slug)
    assert len(batch.rows) == len(list(batch.folder.rglob("*.ipynb"))) + len(list(batch.folder.rglob("*.zip")))
    for name, statuses in batch.expected.items():
        row = batch.rows[name]
        assert row["status"] in statuses, (name, row["status"], row["message"])
        assert row["status"] == "ok" or row["message"], name  # every problem is explained


@pytest.mark.parametrize("slug", AUTOGRADED_POINTS)
def test_reference_and_exported_student_notebook_score_full_marks(assignment_batch, slug):
    rows = assignment_batch(slug).rows
    references = ["samples/complete.ipynb", "exports/without_latex.zip",
                  *(name for name in rows if name == "samples/complete_export.zip" or name.startswith("exports/"))]
    for name in dict.fromkeys(references):
        row = rows[name]
        assert row["possible"] == AUTOGRADED_POINTS[slug] and row["total"] == row["possible"], failures(row, hidden=True)
        assert not failures(row, hidden=False), failures(row, hidden=False)


@pytest.mark.parametrize("slug", AUTOGRADED_POINTS)
def test_blank_notebook_scores_zero(assignment_batch, slug):
    row = assignment_batch(slug).rows["samples/blank.ipynb"]
    assert row["total"] == 0 and row["possible"] == AUTOGRADED_POINTS[slug]
    assert row["scores"] and all(score == 0 for score in row["scores"].values()), row["scores"]


@pytest.mark.parametrize("slug, variant", variants("WRONG"), ids=lambda v: v if isinstance(v, str) else v["name"])
def test_known_wrong_implementation_loses_points_and_fails_its_public_check(assignment_batch, slug, variant):
    row = assignment_batch(slug).rows[f"variants/{variant_notebook(variant)}.ipynb"]
    assert row["total"] < row["possible"]
    assert not set(variant["must_lose"]) - failures(row, hidden=True), failures(row, hidden=True)
    assert not set(variant.get("must_fail_public", ())) - failures(row, hidden=False), failures(row, hidden=False)
    assert not set(variant.get("must_keep", ())) & failures(row, hidden=True), \
        f"lost points it must keep: {sorted(set(variant['must_keep']) & failures(row, hidden=True))}"


@pytest.mark.parametrize("slug, variant", variants("CORRECT"), ids=lambda v: v if isinstance(v, str) else v["name"])
def test_alternative_correct_implementation_keeps_full_points(assignment_batch, slug, variant):
    row = assignment_batch(slug).rows[f"variants/{variant_notebook(variant)}.ipynb"]
    assert row["total"] == row["possible"], failures(row, hidden=True)
    assert not failures(row, hidden=False), failures(row, hidden=False)
