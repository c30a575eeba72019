"""The karate-club GCN assignment's own checks: the student's run finds the split, and the data and
baseline in ``helpers``. Its build and grading batch are checked in ``test_assignment_batches``."""

import torch

from tests.support.adversarial import grade_forgeries
from tests.support.batches import LIMITS
from helpers.karate_gnn import accuracy, label_propagation, load_karate_club
from tests.karate_gnn_variants import FORGEABLE_PROPERTIES
from tests.support.student_run import printed

SLUG = "karate_gnn"


def test_student_run_passes_every_public_check_and_finds_the_split(assignment_batch):
    folder = assignment_batch(SLUG).folder
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


def test_forgeries_pass_only_what_trivial_functions_pass(layout, assignment_batch, tmp_path):
    """Issue 35: a notebook that implements nothing and makes every number computed in its kernel lie
    passes no hidden test (it passed 3 of 15 points before the property checks were judged from raw
    values); one that also sends what each property accepts passes only the no-leak test, which any
    training that looks at the labelled members alone passes honestly."""
    passed = grade_forgeries(layout, SLUG, assignment_batch(SLUG).folder / "samples" / "blank.ipynb", tmp_path, LIMITS)
    assert passed == {"every_number": set(), "collected_values": FORGEABLE_PROPERTIES}
