"""The autoencoders assignment's own checks: the student's run, and the data and harnesses in
``helpers``. Its build and grading batch are checked in ``test_assignment_batches``."""

import pytest
import torch

from helpers.autoencoders import (fit_linear_autoencoder, linear_map, load_mnist, make_synthetic, pretrain,
                                  principal_angle_cosines)
from tests.support.adversarial import grade_forgeries
from tests.support.batches import LIMITS
from tests.support.student_run import printed

SLUG = "autoencoders"


def test_student_run_passes_every_public_check_and_runs_the_grid(assignment_batch):
    folder = assignment_batch(SLUG).folder
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 4, said
    assert "pretraining and probing: 12 steps" in said  # the fast grid: 2 data sets x 2 kinds x 3 variants x 1 k
    assert "MNIST, 200 labels: raw input" in said and "k = 10: loss" in said


def test_synthetic_data_has_twenty_high_variance_directions_and_a_fixed_split():
    data = make_synthetic()
    (X, y), (X_val, _), (X_test, _) = data.train, data.val, data.test
    assert (len(X), len(X_val), len(X_test)) == (14_000, 4_000, 2_000) and X.shape[1] == 100
    assert X.dtype == torch.float32 and y.dtype == torch.int64 and 0.45 < y.float().mean() < 0.55
    eigenvalues = torch.linalg.eigvalsh(torch.cov(X.T.double())).flip(0)
    assert (eigenvalues[:20] > 8.5).all() and (eigenvalues[:20] < 11.5).all()
    assert (eigenvalues[20:] < 1.3).all() and (eigenvalues[20:] > 0.7).all()
    assert (X.var(dim=0) < 5).all()  # the rotation spreads the 20 directions over every coordinate
    assert torch.equal(make_synthetic().train[0], X)


def test_mnist_is_the_bundled_digits_offline_and_shuffled():
    data = load_mnist()
    (X, y), (X_test, y_test) = data.train, data.test
    assert X.shape == (4000, 784) and X_test.shape == (1000, 784) and data.val is None
    assert X.min() == 0 and X.max() == 1 and X.dtype == torch.float32
    assert set(y[:200].tolist()) == set(range(10))  # the 200 probe labels cover every digit
    assert torch.equal(torch.bincount(torch.cat([y, y_test])), torch.full((10,), 500))
    assert len(data.head(300).train[0]) == 300 and data.head(None) is data


def test_principal_angle_cosines_see_subspaces_not_bases():
    g = torch.Generator().manual_seed(0)
    basis = torch.randn(8, 3, generator=g)
    mixed = basis @ torch.randn(3, 3, generator=g)  # the same subspace in another basis
    assert torch.allclose(principal_angle_cosines(basis, mixed), torch.ones(3, dtype=torch.float64), atol=1e-10)
    e = torch.eye(8)
    assert torch.allclose(principal_angle_cosines(e[:, :2], e[:, 2:4]), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="same shape"):
        principal_angle_cosines(basis, basis[:, :2])


def test_a_converged_linear_autoencoder_spans_the_principal_subspace():
    g = torch.Generator().manual_seed(1)
    rotation, _ = torch.linalg.qr(torch.randn(10, 10, generator=g))
    X = (torch.randn(3000, 10, generator=g) * torch.linspace(3, 0.5, 10)) @ rotation.T + 4.0
    model = torch.nn.Sequential(torch.nn.Linear(10, 3), torch.nn.Linear(3, 10))
    fit_linear_autoencoder(model, X)
    eigenvectors = torch.linalg.eigh(torch.cov(X.T.double()))[1].flip(1)[:, :3]
    assert principal_angle_cosines(linear_map(model[1:]), eigenvectors).min() > 0.999


def test_pretrain_refuses_an_unknown_variant_and_bad_data():
    model = torch.nn.Linear(4, 4)
    with pytest.raises(ValueError, match="variant"):
        pretrain(model, torch.zeros(8, 4), lambda *a: 0.0, "sparse", epochs=1)
    with pytest.raises((TypeError, ValueError), match="X"):
        pretrain(model, torch.zeros(8, 4, dtype=torch.long), lambda *a: 0.0, "vanilla", epochs=1)


def test_forgeries_pass_no_hidden_test(layout, assignment_batch, tmp_path):
    """Issue 35: a notebook that implements nothing and makes every number computed in its kernel lie
    (5.5 of 14 points before the property checks were judged from raw values: the noise, the mask and
    both probe tests), or that also sends what each property accepts, passes no hidden test. The
    statistics of the noise and the mask are the grader's, and the probe's accuracies, numbers the
    function reports itself, are compared with the reference solution's instead of bounds the kernel sees."""
    passed = grade_forgeries(layout, SLUG, assignment_batch(SLUG).folder / "samples" / "blank.ipynb", tmp_path, LIMITS)
    assert passed == {"every_number": set(), "collected_values": set()}
