"""End to end on the karate-club GCN assignment: build, sync, one sealed grading batch of the
samples, the known-wrong and known-correct variants and a student's real export."""

import pytest
import torch

from autograder.build import build
from autograder.check import _tree_differences
from autograder.grade import Grader

from conftest import LIMITS, write_batch
from helpers.karate_gnn import accuracy, label_propagation, load_karate_club
from karate_gnn_variants import CORRECT, WRONG
from student_run import printed

SLUG = "karate_gnn"


def failures(row, hidden):
    return {case["test"] for q in row["questions"].values() for case in q["cases"]
            if case["hidden"] == hidden and not case["passed"]}


@pytest.fixture(scope="session")
def karate_notebooks(layout, tmp_path_factory):
    folder = tmp_path_factory.mktemp("karate_notebooks")
    build(layout, SLUG, notebooks_dir=folder, log=lambda *args: None)
    return folder


@pytest.fixture(scope="session")
def karate_graded(layout, karate_notebooks, tmp_path_factory):
    folder = tmp_path_factory.mktemp("karate_submissions")
    expected = write_batch(layout, SLUG, karate_notebooks, folder, WRONG + CORRECT, ("without_latex",))
    rows = Grader(layout, folder, tmp_path_factory.mktemp("karate_results"), LIMITS, jobs=2).run(log=lambda *a: None)
    return {row["file"]: row for row in rows}, expected, folder


def test_committed_student_notebook_matches_a_fresh_build(layout, karate_notebooks):
    differences = list(_tree_differences(karate_notebooks / SLUG, layout.student_dir(SLUG)))
    assert differences == [], "notebooks/ is stale: run `course build` and commit"


def test_every_submission_gets_its_row_and_status(karate_graded):
    rows, expected, _ = karate_graded
    for name, statuses in expected.items():
        assert rows[name]["status"] in statuses, (name, rows[name]["status"], rows[name]["message"])


def test_reference_and_exported_student_notebook_score_full_marks(karate_graded):
    rows = karate_graded[0]
    for name in ("samples/complete.ipynb", "samples/complete_export.zip", "exports/without_latex.zip"):
        row = rows[name]
        assert row["possible"] == 15 and row["total"] == row["possible"], failures(row, hidden=True)
        assert not failures(row, hidden=False), failures(row, hidden=False)


def test_blank_notebook_scores_zero(karate_graded):
    row = karate_graded[0]["samples/blank.ipynb"]
    assert row["total"] == 0 and row["possible"] == 15


@pytest.mark.parametrize("variant", WRONG, ids=lambda v: v["name"])
def test_known_wrong_implementation_loses_points_and_fails_its_public_check(karate_graded, variant):
    row = karate_graded[0][f"variants/{variant['name']}.ipynb"]
    assert row["total"] < row["possible"]
    assert not set(variant["must_lose"]) - failures(row, hidden=True), failures(row, hidden=True)
    assert not set(variant["must_fail_public"]) - failures(row, hidden=False), failures(row, hidden=False)


@pytest.mark.parametrize("variant", CORRECT, ids=lambda v: v["name"])
def test_alternative_correct_implementation_keeps_full_points(karate_graded, variant):
    row = karate_graded[0][f"variants/{variant['name']}.ipynb"]
    assert row["total"] == row["possible"], failures(row, hidden=True)
    assert not failures(row, hidden=False), failures(row, hidden=False)


def test_student_run_passes_every_public_check_and_finds_the_split(karate_graded):
    folder = karate_graded[2]
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 5, said
    assert "gradcheck of a two-layer GCN with your backward pass: True" in said
    assert "members the GCN gets wrong: [8]" in said  # Zachary's own misassigned member, in the fast setting too


def test_data_is_zacharys_real_split_with_two_labels():
    club = load_karate_club()
    assert club.A.shape == (34, 34) and torch.equal(club.A, club.A.T) and set(club.A.unique().tolist()) == {0.0, 1.0}
    assert torch.diagonal(club.A).sum() == 0 and int(club.A.sum()) == 2 * 78
    assert club.train_nodes.tolist() == [0, 33] and len(club.test_nodes) == 32
    assert club.labels[0] == 0 and club.labels[33] == 1 and int(club.labels.sum()) == 17


def test_label_propagation_baseline_uses_node_order():
    club = load_karate_club()
    correct, total = accuracy(label_propagation(club), club.labels, club.test_nodes)
    assert total == 32 and correct >= 30  # harmonic function from the two labels: only member 8 is hard
