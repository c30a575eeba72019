"""The karate-club GCN assignment's own checks: the student's run finds the split, and the data and
baseline in ``helpers``. Its build and grading batch are checked in ``test_assignment_batches``."""

import torch

from helpers.karate_gnn import accuracy, label_propagation, load_karate_club
from student_run import printed

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
