"""helpers: seeds, device, the three settings, argument checks and the attention heatmap."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from helpers import budget, check_tensor, fast_mode, get_device, plot_attention, progress, seed_everything, setting, use_setting
from helpers.runtime import FAST_ENV, SETTING_ENV

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


def test_seed_everything_makes_torch_reproducible():
    seed_everything(3)
    a, b = torch.randn(5), np.random.rand(3)
    assert seed_everything(3) is None  # a first cell ending with it prints nothing
    assert torch.equal(a, torch.randn(5)) and np.array_equal(b, np.random.rand(3))


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_seed_everything_rejects_bad_seeds(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(bad)


def test_budget_has_one_value_per_setting_and_the_environment_wins(monkeypatch, capsys):
    monkeypatch.delenv(SETTING_ENV, raising=False)
    monkeypatch.delenv(FAST_ENV, raising=False)
    assert use_setting("full") == "full" and budget(full=1000, quick=100, grading=10) == 1000
    assert use_setting("quick") == "quick" and budget(full=1000, quick=100, grading=10) == 100
    assert budget(full=1000, fast=10) == 1000  # an older call without quick= uses full there
    assert "Setting: quick" in capsys.readouterr().out
    monkeypatch.setenv(SETTING_ENV, "grading")  # what the grader sets: it wins over the notebook
    assert use_setting("full") == "grading" and fast_mode() and budget(full=1000, quick=100, grading=10) == 10
    assert "overrides use_setting('full')" in capsys.readouterr().out
    monkeypatch.delenv(SETTING_ENV)
    monkeypatch.setenv(FAST_ENV, "1")  # the older switch still means grading
    assert setting() == "grading" and budget(full=[1, 2], fast=[1]) == [1]
    monkeypatch.setenv(FAST_ENV, "0")
    use_setting("full")
    assert setting() == "full" and not fast_mode()


def test_settings_reject_unknown_names(monkeypatch):
    with pytest.raises(ValueError, match="'full', 'quick', 'grading'"):
        use_setting("fast")
    monkeypatch.setenv(SETTING_ENV, "slow")
    with pytest.raises(ValueError, match="COURSE_SETTING='slow' is not a setting"):
        setting()
    monkeypatch.delenv(SETTING_ENV)
    with pytest.raises(TypeError, match="grading="):
        budget(full=1, quick=2)


def test_get_device_is_cpu_here_and_explains_a_missing_gpu():
    assert get_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert get_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no GPU"):
            get_device("cuda")
    with pytest.raises(ValueError, match="prefer"):
        get_device("tpu")


def test_check_tensor_names_the_argument():
    with pytest.raises(TypeError, match="Q must be a torch.Tensor, got list"):
        check_tensor("Q", [1, 2])
    with pytest.raises(ValueError, match=r"K must have at least 2 dimensions, got shape \(3,\)"):
        check_tensor("K", torch.ones(3), min_ndim=2)
    with pytest.raises(TypeError, match="floating-point"):
        check_tensor("V", torch.ones(2, 2, dtype=torch.long), floating=True)
    x = torch.ones(2, 3)
    assert check_tensor("x", x, ndim=2, floating=True) is x


def test_plot_attention_draws_labelled_heatmap():
    weights = torch.softmax(torch.randn(1, 3, 4), dim=-1)
    ax = plot_attention(weights, query_labels=["a", "b", "c"], key_labels=["w", "x", "y", "z"], title="demo")
    assert ax.get_title() == "demo" and ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    assert len(ax.texts) == 12  # small matrices are annotated
    matplotlib.pyplot.close("all")


def test_plot_attention_rejects_bad_input():
    with pytest.raises(ValueError, match="2 dimensions"):
        plot_attention(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="query_labels has 2 labels but weights has 3"):
        plot_attention(torch.ones(3, 3), query_labels=["a", "b"])


def test_progress_yields_every_item_outside_a_notebook(capsys):
    assert list(progress(range(5), desc="steps")) == [0, 1, 2, 3, 4]
    assert list(progress(iter("ab"), desc="letters")) == ["a", "b"]  # no len(): still works


def test_the_shared_training_loop_logs_enough_points_and_ends_in_eval_mode():
    """A 20-step run with a point every 25 steps used to draw an empty loss plot."""
    import torch

    from helpers.training import plot_training_loss, run_training

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(64, 3), torch.randn(64, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    scored = []
    log = run_training(model, steps=20, optimizer=optimizer, schedule=schedule, name="linear", every=25,
                       loss_at=lambda step: torch.nn.functional.mse_loss(model(x), y),
                       evaluate=lambda m: scored.append(m.training) or 0.5, eval_every=10)
    assert len(log.steps) >= 10 and log.steps[-1] == 20 and log.losses[-1] < log.losses[0]
    assert log.eval_steps == [10, 20] and log.accuracies == [0.5, 0.5] and scored == [False, False]
    assert not model.training and log.seconds > 0
    ax = plot_training_loss(log)
    assert ax.lines[0].get_marker() == "o"  # few points: each one marked
    # a loss that moved by less than a factor 4 gets a linear axis; a log one got a single label or none
    assert ax.get_yscale() == ("log" if max(log.losses) / min(log.losses) >= 4 else "linear")
    ax.figure.canvas.draw()
    shown = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert len(set(shown)) >= 2 and len(set(shown)) == len(shown), shown  # readable, no label twice
    assert not any("10^" in t or "e-" in t or "x10" in t for t in shown), shown


def _loss_plot_labels(steps, first, last):
    """The loss plot of a loss falling geometrically from ``first`` to ``last``, and its y labels in view."""
    import numpy as np

    from helpers.training import TrainingLog, plot_training_loss

    ax = plot_training_loss(TrainingLog("a", steps, list(np.geomspace(first, last, len(steps))), seconds=1.0))
    ax.figure.canvas.draw()
    low, high = ax.get_ylim()
    return ax, [t.get_text() for t in ax.get_yticklabels() if t.get_text() and low <= t.get_position()[1] <= high]


def test_the_loss_plot_labels_a_log_axis_in_plain_decimals():
    """A loss from 3.9 to 0.01 gets a log axis whose labels read 0.01, 0.1, 1 (not 10^-2 or 3.71x10^0)."""
    ax, shown = _loss_plot_labels(list(range(25, 2001, 25)), 3.9, 0.01)
    assert ax.get_yscale() == "log" and {"0.01", "0.1", "1"} <= set(shown), shown
    assert not any("10^" in t or "e-" in t for t in shown), shown
    assert ax.get_legend() is None and "a (1 s, 2000 steps)" in ax.get_title()  # one run: named in the title


def test_the_loss_plot_of_several_runs_keeps_its_legend_off_the_curves():
    """Two runs get a legend above the axes (over no curve), leaving the plot its full width."""
    import numpy as np

    from helpers.training import TrainingLog, plot_training_loss

    steps = list(range(50, 1401, 50))
    ax = plot_training_loss(*(TrainingLog(name, steps, list(np.geomspace(2.5, low, len(steps))), seconds=9.0)
                              for name, low in (("pretraining", 0.55), ("synthesizer pretraining", 0.7))))
    ax.figure.canvas.draw()
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y0 >= box.y1 - 1 and box.width >= 0.75 * ax.figure.bbox.width
    assert ax.title.get_window_extent().y0 >= legend.y1 - 1  # the title is not drawn over the legend


def test_the_loss_plot_puts_three_labels_on_a_span_under_one_decade():
    """A pretraining loss from 2.5 to 0.55 (the full setting's) reads 0.7, 1, 1.5, 2, not just 1 and 2."""
    ax, shown = _loss_plot_labels(list(range(50, 1401, 50)), 2.5, 0.55)
    assert ax.get_yscale() == "log" and len(shown) >= 3 and {"1", "2"} <= set(shown), shown
